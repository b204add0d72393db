/**
 * The memory method of the capacity scenarios (capacity, ws_capacity; BENCHMARKS.md,
 * Method): a process sampled after a full GC (plain, or the compacting GC of a
 * low-memory notification), its RSS read from /proc a little later, and what N held
 * runs or sessions added between two samples, per run — RSS, the young generation apart,
 * the V8 heap and each heap space.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { MemorySnapshot } from '../../src/core/memory-snapshot';
import { formatBytes } from '../scenario';
import { ratio } from './stats';

/**
 * RSS is read this long after the GC: V8 and glibc give pages back on background threads
 * once a GC is done, and a read at once counted up to 43 MB (4.3 KB per run) that was gone
 * 2 s later, which made the figure right after the ramp move by 4 KiB between runs.
 */
export const RSS_READ_DELAY_MS = 2_000;

/** A process's memory after a full GC: the snapshot it reported and its RSS read from /proc. */
export interface Sample {
  /** A build from before the spaces were reported (BENCH_GATEWAY_MAIN) has none. */
  snapshot: NodeJS.MemoryUsage & Partial<Pick<MemorySnapshot, 'spaces'>>;
  rss: number;
}

/**
 * A sampler of one process: `gc(compact)` runs its full GC and answers its snapshot
 * (the gateway's POST /debug/gc, the raw holder's `gc` query), `rss()` reads /proc.
 */
export function sampler(gc: (compact: boolean) => Promise<Sample['snapshot']>, rss: () => number): (compact?: boolean) => Promise<Sample> {
  return async (compact = false) => {
    const snapshot = await gc(compact);
    await sleep(RSS_READ_DELAY_MS);
    return { snapshot, rss: rss() };
  };
}

/** What N runs (or sessions) added between two samples, per run. */
export interface PerRun {
  rss: number;
  heapUsed: number;
  /** V8 heap reserved: used plus free space in its pages. */
  heapTotal: number;
  external: number;
  /** The young generation's committed bytes grown (V8's new space; 0 for a build that does not report spaces). */
  youngGeneration: number;
  /** `rss` less `youngGeneration`: what the runs cost outside the young generation. */
  rssOutsideYoung: number;
  /** Each heap space's committed (`size`) and live (`used`) bytes grown. */
  spaces: Record<string, { size: number; used: number }>;
}

export function perRun(before: Sample, after: Sample, n: number): PerRun {
  const spaces: PerRun['spaces'] = {};
  for (const [name, space] of Object.entries(after.snapshot.spaces ?? {})) {
    const was = before.snapshot.spaces?.[name] ?? { size: 0, used: 0 };
    if (space.size === was.size && space.used === was.used) continue;
    spaces[name] = { size: Math.round((space.size - was.size) / n), used: Math.round((space.used - was.used) / n) };
  }
  const per = (a: number, b: number): number => Math.round((b - a) / n);
  const young = (sample: Sample): number => sample.snapshot.spaces?.['new_space']?.size ?? 0;
  return {
    rss: per(before.rss, after.rss),
    youngGeneration: per(young(before), young(after)),
    rssOutsideYoung: per(before.rss - young(before), after.rss - young(after)),
    heapUsed: per(before.snapshot.heapUsed, after.snapshot.heapUsed),
    heapTotal: per(before.snapshot.heapTotal, after.snapshot.heapTotal),
    external: per(before.snapshot.external, after.snapshot.external),
    spaces,
  };
}

/** The gateway's figures against the raw side's: settled and right after the ramp, whole and outside the young generation. */
export interface MemoryRatios {
  settled: number | null;
  ramp: number | null;
  settledOutsideYoung: number | null;
  rampOutsideYoung: number | null;
}

/**
 * The ratios both capacity scenarios report, and the two lines they log of them; `unit`
 * names what is held (run, session).
 */
export function compareMemory(log: (line: string) => void, unit: string, atRest: PerRun, atRamp: PerRun, raw: { settled: PerRun; ramp: PerRun }): MemoryRatios {
  const ratios: MemoryRatios = {
    settled: ratio(atRest.rss, raw.settled.rss),
    ramp: ratio(atRamp.rss, raw.ramp.rss),
    settledOutsideYoung: ratio(atRest.rssOutsideYoung, raw.settled.rssOutsideYoung),
    rampOutsideYoung: ratio(atRamp.rssOutsideYoung, raw.ramp.rssOutsideYoung),
  };
  log(
    `memory per ${unit}, settled: ${formatBytes(atRest.rss)} RSS vs raw ${formatBytes(raw.settled.rss)} (${ratios.settled}x); right after the ramp: ${formatBytes(atRamp.rss)} vs ${formatBytes(raw.ramp.rss)} (${ratios.ramp}x)`,
  );
  log(
    `memory per ${unit} outside the young generation, settled: ${formatBytes(atRest.rssOutsideYoung)} vs raw ${formatBytes(raw.settled.rssOutsideYoung)} (${ratios.settledOutsideYoung}x); ` +
      `right after the ramp: ${formatBytes(atRamp.rssOutsideYoung)} vs ${formatBytes(raw.ramp.rssOutsideYoung)} (${ratios.rampOutsideYoung}x); ` +
      `young generation grown per ${unit}: ${atRest.youngGeneration} B vs raw ${raw.settled.youngGeneration} B settled, ${atRamp.youngGeneration} B vs ${raw.ramp.youngGeneration} B after the ramp`,
  );
  return ratios;
}
