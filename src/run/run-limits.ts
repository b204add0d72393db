/**
 * The run limit of every detached run in this process (docs/spec.md §3b), kept with one timer.
 * Every run gets the same LONGRUN_RUN_LIMIT_MS from its start, so deadlines arrive in the
 * order runs were added: a FIFO whose head is the next to fire. A timer per run would
 * cost each of ten thousand held runs a Timeout and its closure; this costs one small
 * entry each. A run that ends first is struck off (its entry emptied), not searched for;
 * struck-off entries are dropped once they outnumber the runs still limited (and all at once
 * when none is), so the queue holds what the runs in flight need, not every run started
 * within the last run limit (issue [26]: a dispatcher of short runs grew it for 55 minutes).
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

/** Struck-off entries are dropped once there are at least this many (and more than live ones): each compaction costs a pass over the queue. */
const COMPACT_AT_STRUCK = 64;

export class RunLimits {
  private queue: Entry[] = [];
  /** Index of the head in `queue` (entries before it are done); compacted now and then. */
  private head = 0;
  /** Entries still holding a run. */
  private live = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly limitMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Starts `run`'s limit now. */
  add(run: LimitedRun): RunLimitEntry {
    const entry: Entry = { deadline: this.now() + this.limitMs, run };
    this.queue.push(entry);
    this.live += 1;
    if (!this.timer) this.arm();
    return entry;
  }

  /** Strikes a run off (it ended before its limit). */
  remove(entry: RunLimitEntry): void {
    if (!entry.run) return;
    entry.run = undefined;
    this.live -= 1;
    const struck = this.queue.length - this.head - this.live;
    if (this.live === 0) this.clear();
    else if (struck >= COMPACT_AT_STRUCK && struck > this.live) {
      this.queue = this.queue.filter((e, i) => i >= this.head && e.run !== undefined);
      this.head = 0;
    }
  }

  /** Runs whose limit is still pending (struck-off entries excluded). */
  get size(): number {
    return this.live;
  }

  /** Entries queued, struck-off ones included (/debug/structures). */
  get queued(): number {
    return this.queue.length - this.head;
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
      if (run) this.live -= 1;
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
    this.clear();
  }

  private clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const entry of this.queue) entry.run = undefined;
    this.queue = [];
    this.head = 0;
    this.live = 0;
  }
}
