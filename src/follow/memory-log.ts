/**
 * The follow log of a gateway without Redis (one replica): every workflow's log in this
 * process's memory, made when a followed run first reports and dropped one TTL after it was
 * made or last touched (as the Redis log is: redis-log.ts). Announcements go back to this process only.
 * What nobody reads or touches any more is swept on a timer of its own, which runs only while
 * a log is held: a log outlives its followers, and nothing else would come back for it.
 */
import type { LogState, FollowEntry, FollowEvent } from './events';
import type { Announcement, LogRead, LogSettings, FollowLog } from './log';

interface Log {
  last: number;
  state: LogState;
  run: FollowEntry | undefined;
  checkpoint: FollowEntry | undefined;
  /** The backlog, oldest first. */
  entries: FollowEntry[];
  expiresAt: number;
}

export class MemoryFollowLog implements FollowLog {
  readonly kind = 'memory';
  private readonly logs = new Map<string, Log>();
  private announced: (message: Announcement) => void = () => undefined;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly settings: LogSettings) {}

  append(workflowId: string, events: readonly FollowEvent[], state: LogState): Promise<number> {
    const now = Date.now();
    let log = this.live(workflowId, now);
    if (!log) {
      // Seeded from the clock, as the Redis log is: ids go on increasing after a log expired.
      log = { last: now * 1_000 - 1, state, run: undefined, checkpoint: undefined, entries: [], expiresAt: now + this.settings.ttlMs };
      this.logs.set(workflowId, log);
      this.sweepOn();
    }
    for (const event of events) {
      const entry: FollowEntry = { id: ++log.last, kind: event.kind, data: event.data };
      log.entries.push(entry);
      if (entry.kind === 'run') log.run = entry;
      else if (entry.kind === 'checkpoint') log.checkpoint = entry;
    }
    if (log.entries.length > this.settings.backlog) log.entries.splice(0, log.entries.length - this.settings.backlog);
    log.state = state;
    return Promise.resolve(log.last);
  }

  read(workflowId: string, after: number | undefined): Promise<LogRead> {
    const log = this.live(workflowId, Date.now());
    if (!log) return Promise.resolve({ last: undefined, first: undefined, state: undefined, run: undefined, checkpoint: undefined, entries: [] });
    const from = after ?? Math.max(log.run?.id ?? 0, log.checkpoint?.id ?? 0);
    return Promise.resolve({
      last: log.last,
      first: log.entries[0]?.id,
      state: log.state,
      run: log.run,
      checkpoint: log.checkpoint,
      entries: log.entries.filter((entry) => entry.id > from),
    });
  }

  touch(workflowIds: readonly string[]): void {
    const now = Date.now();
    for (const id of workflowIds) {
      const log = this.live(id, now);
      if (log) log.expiresAt = now + this.settings.ttlMs;
    }
    this.sweep(now);
  }

  // This process's own appends reach its feeds from the hub directly: nothing to deliver twice.
  onEntries(): void {}

  subscribe(): Promise<void> {
    return Promise.resolve();
  }

  unsubscribe(): void {}

  announce(message: Announcement): Promise<void> {
    this.announced(message);
    return Promise.resolve();
  }

  onAnnouncement(handler: (message: Announcement) => void): void {
    this.announced = handler;
  }

  onResubscribed(): void {}

  close(): Promise<void> {
    this.logs.clear();
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    return Promise.resolve();
  }

  /** How many logs are held (tests: nothing for a workflow nobody follows). */
  get size(): number {
    return this.logs.size;
  }

  private sweepOn(): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => this.sweep(Date.now()), this.settings.ttlMs);
    this.sweeper.unref();
  }

  private sweep(now: number): void {
    for (const [id, log] of this.logs) if (log.expiresAt <= now) this.logs.delete(id);
    if (this.logs.size === 0) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }

  private live(workflowId: string, now: number): Log | undefined {
    const log = this.logs.get(workflowId);
    if (log && log.expiresAt <= now) {
      this.logs.delete(workflowId);
      return undefined;
    }
    return log;
  }
}
