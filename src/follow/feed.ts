/**
 * One followed workflow on a replica with followers of it (docs/spec.md §14): the log's live
 * entries, put in order, without a gap or a repeat, and handed to each follower. Entries
 * arrive from two places — this replica's own appends at once, and the log's delivery of
 * every replica's appends (this one's again) — in any order and possibly twice; the ids are
 * consecutive, so a repeat is an id already passed and a gap is an id too far ahead. A gap
 * (a delivery lost while the subscription was down) is filled by reading the log; what the
 * log no longer holds is lost, and each follower is told so (its next checkpoint says
 * `resync`).
 */
import type { FollowEntry } from './events';
import type { FollowLog } from './log';

/** What a feed hands entries to: a follower (follower.ts). */
export interface FeedMember {
  /** A batch of entries follows (what a turn of the event loop brought): the time to check what the last one left unread. */
  batch(): void;
  receive(entry: FollowEntry): void;
  /** Entries were lost before the next one. */
  lost(): void;
  /** Whether it follows a run now (the quiet check asks). */
  readonly following: boolean;
  noRunInFlight(): void;
}

export class Feed {
  readonly members = new Set<FeedMember>();
  /** Resolves once the log delivers this workflow's appends here. */
  readonly subscribed: Promise<void>;
  /** When the last entry came (the quiet check: a holder that died leaves no end). */
  lastEntryAt = Date.now();
  lastCheckAt = 0;
  /** The last id handed on; undefined before the log had any. */
  private last: number | undefined;
  /** False until the first read says where the log stood: entries wait. */
  private started = false;
  private catchingUp = false;
  private queue: FollowEntry[] = [];

  constructor(
    readonly workflowId: string,
    private readonly log: FollowLog,
  ) {
    this.subscribed = log.subscribe(workflowId);
  }

  /** The first read of the log after subscribing says where it stood (later reads change nothing). */
  noteRead(last: number | undefined): void {
    if (this.started) return;
    this.started = true;
    this.last = last;
    this.drain();
  }

  /** Live entries, as delivered (a batch is consecutive and ordered). */
  receive(entries: readonly FollowEntry[]): void {
    this.queue.push(...entries);
    if (this.started && !this.catchingUp) this.drain();
  }

  /** Deliveries may have been lost: read the log after the last entry handed on. */
  catchUp(): void {
    if (!this.started || this.catchingUp || this.last === undefined) return;
    this.catchingUp = true;
    const after = this.last;
    this.log.read(this.workflowId, after).then(
      (read) => this.caughtUp(read.entries),
      () => this.caughtUp([]),
    );
  }

  /** Stops receiving (the last follower went). */
  close(): void {
    this.log.unsubscribe(this.workflowId);
    this.members.clear();
    this.queue = [];
  }

  private caughtUp(read: readonly FollowEntry[]): void {
    this.catchingUp = false;
    this.queue.unshift(...read);
    this.drain(true);
  }

  /**
   * Hands on what is queued, in id order. A gap starts a catch-up, unless this is its
   * outcome: then what the log could not give is lost, and the members are told.
   */
  private drain(afterCatchUp = false): void {
    const queued = this.queue.sort((a, b) => a.id - b.id);
    this.queue = [];
    let batch = false;
    for (let i = 0; i < queued.length; i++) {
      const entry = queued[i] as FollowEntry;
      if (this.last !== undefined && entry.id <= this.last) continue;
      if (this.last !== undefined && entry.id > this.last + 1) {
        if (!afterCatchUp) {
          this.queue = queued.slice(i);
          this.catchUp();
          return;
        }
        for (const member of this.members) member.lost();
      }
      this.last = entry.id;
      this.lastEntryAt = Date.now();
      if (!batch) for (const member of this.members) member.batch();
      batch = true;
      for (const member of this.members) member.receive(entry);
    }
  }
}
