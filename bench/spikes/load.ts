/**
 * The two load shapes every spike client runs, measured inside the client process: CPU
 * (process.cpuUsage(), every thread of the process, user and system apart) over the whole
 * shape, and each call's latency from the moment it was issued to its settling.
 *
 *  - open: calls issued on a schedule (`ratePerS`) whatever the answers, for `durationMs`;
 *    one timer per issue, the same in every variant (the `noop` variant prices it).
 *  - burst: `size` calls issued in one synchronous loop, all awaited, then `gapMs` idle;
 *    `count` times. The idle gaps are inside the CPU window (they cost timers only).
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { percentile, round } from '../measure/stats';

/** One unit of wire work; resolves when its answer is in and read, rejects on any failure. */
export type Call = () => Promise<void>;

export type ShapeSpec = { shape: 'open'; ratePerS: number; durationMs: number } | { shape: 'burst'; size: number; count: number; gapMs: number };

export interface ShapeResult {
  shape: ShapeSpec['shape'];
  calls: number;
  errors: number;
  /** The first error's message, when any call failed. */
  firstError: string | null;
  wallMs: number;
  /** Client process CPU (user + system) over the shape, per call. */
  cpuMsPerCall: number;
  userMsPerCall: number;
  sysMsPerCall: number;
  /** read/readv and write/writev syscalls of the process per call (/proc/self/io; null where there is none). */
  readsPerCall: number | null;
  writesPerCall: number | null;
  p50Ms: number | null;
  p99Ms: number | null;
}

/**
 * A process's (this one's by default) read-like and write-like syscalls so far (syscr, syscw). libuv reads and
 * writes sockets with read/readv and write/writev, which these count (sendmsg/recvmsg,
 * used for IPC only, are not); an eventfd wakeup counts one each.
 */
export function syscallCounts(pid: number | 'self' = 'self'): { reads: number; writes: number } | undefined {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const field = (name: string): number => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(io)?.[1] ?? Number.NaN);
    return { reads: field('syscr'), writes: field('syscw') };
  } catch {
    return undefined;
  }
}

class Tally {
  readonly latencies: number[] = [];
  errors = 0;
  firstError: string | null = null;

  run(call: Call): Promise<void> {
    const issued = performance.now();
    return call().then(
      () => {
        this.latencies.push(performance.now() - issued);
      },
      (err: unknown) => {
        this.errors += 1;
        this.firstError ??= err instanceof Error ? err.message : String(err);
      },
    );
  }
}

async function openLoop(call: Call, tally: Tally, ratePerS: number, durationMs: number): Promise<number> {
  const total = Math.round((ratePerS * durationMs) / 1_000);
  const intervalMs = 1_000 / ratePerS;
  const inFlight: Array<Promise<void>> = [];
  const start = performance.now();
  let issued = 0;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      // Every call that is due by now goes out, so a late timer does not lower the rate.
      const due = Math.min(total, Math.floor((performance.now() - start) / intervalMs) + 1);
      while (issued < due) {
        inFlight.push(tally.run(call));
        issued += 1;
      }
      if (issued >= total) resolve();
      else setTimeout(tick, Math.max(0, start + issued * intervalMs - performance.now()));
    };
    tick();
  });
  await Promise.all(inFlight);
  return total;
}

async function bursts(call: Call, tally: Tally, size: number, count: number, gapMs: number): Promise<number> {
  for (let b = 0; b < count; b++) {
    const burst: Array<Promise<void>> = [];
    for (let i = 0; i < size; i++) burst.push(tally.run(call));
    await Promise.all(burst);
    await sleep(gapMs);
  }
  return size * count;
}

/** Runs one shape against `call` and reports this process's CPU per call and the latencies. */
export async function runShape(call: Call, spec: ShapeSpec): Promise<ShapeResult> {
  const tally = new Tally();
  const started = performance.now();
  const ioBefore = syscallCounts();
  const before = process.cpuUsage();
  const calls = spec.shape === 'open' ? await openLoop(call, tally, spec.ratePerS, spec.durationMs) : await bursts(call, tally, spec.size, spec.count, spec.gapMs);
  const used = process.cpuUsage(before);
  const ioAfter = syscallCounts();
  const wallMs = performance.now() - started;
  const perCall = (micros: number): number => round(micros / 1_000 / calls, 4) ?? Number.NaN;
  return {
    shape: spec.shape,
    calls,
    errors: tally.errors,
    firstError: tally.firstError,
    wallMs: Math.round(wallMs),
    cpuMsPerCall: perCall(used.user + used.system),
    userMsPerCall: perCall(used.user),
    sysMsPerCall: perCall(used.system),
    // Reading /proc/self/io is itself one read (and an open): left in, 2 per shape.
    readsPerCall: ioBefore && ioAfter ? round((ioAfter.reads - ioBefore.reads) / calls, 2) : null,
    writesPerCall: ioBefore && ioAfter ? round((ioAfter.writes - ioBefore.writes) / calls, 2) : null,
    p50Ms: round(percentile(tally.latencies, 50), 3),
    p99Ms: round(percentile(tally.latencies, 99), 3),
  };
}

/** Exercises `call` before any measurement: connections opened, code paths compiled. */
export async function warmUp(call: Call): Promise<void> {
  const tally = new Tally();
  await bursts(call, tally, 200, 3, 20);
  await openLoop(call, tally, 400, 500);
  if (tally.errors > 0) throw new Error(`warm-up: ${tally.errors} calls failed, first: ${tally.firstError}`);
}
