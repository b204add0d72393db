/**
 * What a process costs, read from /proc: resident memory, CPU time, and a meter of the CPU
 * each process of a stack uses over a phase (on two cores, every process's share is a share
 * the gateway did not get).
 */
import { readFileSync } from 'node:fs';

/** Resident set size of a process in bytes (VmRSS of /proc/<pid>/status). */
export function readRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  if (!match) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]) * 1024;
}

/** CPU time (user + system) a process has used so far, in ms (/proc/<pid>/stat, 10 ms ticks). */
export function readCpuMs(pid: number, thread?: number): number {
  const stat = readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at state, field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return ticks * 10;
}

/**
 * CPU used by each named process between start() and read(). A process that exits
 * meanwhile keeps the last value sampled (every 50 ms) before it went.
 */
export class CpuMeter {
  private readonly before = new Map<string, number>();
  private readonly latest = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly pids: Record<string, number>) {}

  start(): this {
    this.sample();
    for (const [name, value] of this.latest) this.before.set(name, value);
    this.timer = setInterval(() => this.sample(), 50);
    this.timer.unref();
    return this;
  }

  private sample(): void {
    for (const [name, pid] of Object.entries(this.pids)) {
      const value = safeCpu(pid);
      if (!Number.isNaN(value)) this.latest.set(name, value);
    }
  }

  /** CPU ms per process since start(), divided by `per` (e.g. per request); stops sampling. */
  read(per = 1): Record<string, number> {
    clearInterval(this.timer);
    this.sample();
    const out: Record<string, number> = {};
    for (const name of Object.keys(this.pids)) {
      const used = (this.latest.get(name) ?? Number.NaN) - (this.before.get(name) ?? Number.NaN);
      out[name] = Math.round((used / per) * 100) / 100;
    }
    return out;
  }
}

function safeCpu(pid: number): number {
  try {
    return readCpuMs(pid);
  } catch {
    return Number.NaN;
  }
}
