/**
 * The run limit of every detached run in this process (docs/spec.md §3b), kept with one timer.
 * Every run gets the same LONGRUN_RUN_LIMIT_MS from its start, so deadlines arrive in the
 * order runs were added: a FIFO whose head is the next to fire. A timer per run would
 * cost each of ten thousand held runs a Timeout and its closure; this costs one small
 * entry each. A run that ends first is struck off (its entry emptied), not searched for.
 */

import { STOPS, type StopReason } from './stop-reasons';

/** What the limiter needs of a run: its stop, called with `run_limit` at the limit. */
export interface LimitedRun {
  stop(reason: StopReason): unknown;
}

const RUN_LIMIT = STOPS.run_limit;

/** A run's place in the queue; emptied when its limit fires or the run ends first. */
export interface RunLimitEntry {
  readonly deadline: number;
  run: LimitedRun | undefined;
}

type Entry = RunLimitEntry;

export class RunLimits {
  private readonly queue: Entry[] = [];
  /** Index of the head in `queue` (entries before it are done); compacted now and then. */
  private head = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly limitMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Starts `run`'s limit now. */
  add(run: LimitedRun): RunLimitEntry {
    const entry: Entry = { deadline: this.now() + this.limitMs, run };
    this.queue.push(entry);
    if (!this.timer) this.arm();
    return entry;
  }

  /** Strikes a run off (it ended before its limit). */
  remove(entry: RunLimitEntry): void {
    entry.run = undefined;
  }

  /** Runs whose limit is still pending (struck-off entries excluded). */
  get size(): number {
    let n = 0;
    for (let i = this.head; i < this.queue.length; i++) if (this.queue[i]?.run) n += 1;
    return n;
  }

  private arm(): void {
    while (this.head < this.queue.length && !this.queue[this.head]?.run) this.head += 1;
    this.compact();
    const next = this.queue[this.head];
    if (!next) return;
    // Node clamps longer timeouts to 1 ms: re-arm in steps of at most 2^31-1.
    const delay = Math.min(Math.max(0, next.deadline - this.now()), 2 ** 31 - 1);
    this.timer = setTimeout(() => this.fire(), delay);
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    const now = this.now();
    while (this.head < this.queue.length) {
      const entry = this.queue[this.head] as Entry;
      if (entry.run && entry.deadline > now) break;
      this.head += 1;
      const run = entry.run;
      entry.run = undefined;
      void run?.stop(RUN_LIMIT);
    }
    this.arm();
  }

  /** Drops the done prefix once it is large, so the array does not grow forever. */
  private compact(): void {
    if (this.head > 1_024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Forgets every pending limit and clears the timer (the process is closing). */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
    this.head = 0;
  }
}
