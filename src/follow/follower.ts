/**
 * One follow stream (docs/spec.md §14): what a client following a workflow is sent.
 *
 *   joining ──start(), a run in flight──► following ◄──► waiting ──idle window passed──► done (`idle`)
 *      └────start(), no run in flight─────────────────────┘
 *                                         following ──a final end──► done (`idle`)
 *   any ──the client went, dropped slow, drain, closing──► done (no `idle`: it resumes)
 *
 * Joining, it replays from the log what came after its position — or, with no position, the
 * latest run and checkpoint and what followed them; with a position the backlog no longer
 * reaches, the latest checkpoint marked `resync` — and keeps what arrives live meanwhile;
 * then it goes live. It never sends an id twice nor out of order: it sends only ids past the
 * last it sent. Following, any event of a run keeps it following; an `end` the owner follows
 * with another segment makes it wait LONGRUN_FOLLOW_IDLE_MS for the next run; a final one, or
 * a wait that passes, ends the stream with `idle`. A follower that starts while no run is in
 * flight (none yet, or the last one ended, resumable or not) waits the same way, so a client
 * that opens the follow and then dispatches sees the run from its `run` event on.
 *
 * A follower never holds a run back: what it has not taken is bounded (LONGRUN_FOLLOW_BUFFER_BYTES);
 * past it the stream is cut, and the client resumes with Last-Event-ID.
 */
import type { FollowDropReason } from './words';
import { KEEPALIVE_FRAME, frameOf, markedResync, sseFrame, stateAfter, type LogState, type FollowEntry } from './events';
import type { FeedMember } from './feed';
import type { LogRead } from './log';
import type { FollowMetrics } from './metrics';

/** The client's side of the stream (the HTTP response, route.ts). */
export interface FollowSink {
  write(data: string | Buffer): void;
  /** Bytes written that the client has not taken yet. */
  readonly buffered: number;
  /** Resolves once the client took what was buffered, or the stream closed. */
  drained(): Promise<void>;
  /** Ends the stream cleanly. */
  end(): void;
  /** Cuts it. */
  destroy(): void;
}

export interface FollowerSettings {
  idleMs: number;
  bufferBytes: number;
}

type Mode = 'joining' | 'following' | 'waiting' | 'done';

/** The run a `run` entry names. */
function runIdOf(entry: FollowEntry): string | undefined {
  try {
    return (JSON.parse(entry.data) as { run_id?: string }).run_id;
  } catch {
    return undefined;
  }
}

export class Follower implements FeedMember {
  private mode: Mode = 'joining';
  private sink: FollowSink | undefined;
  /** The last id sent. */
  private last: number | undefined;
  /** Live entries that came while joining, and their bytes. */
  private pending: FollowEntry[] = [];
  private pendingBytes = 0;
  /** Entries were lost before the next checkpoint: it is sent marked resync. */
  private resyncNext = false;
  /** Where the log stands after the last entry seen, and the run the latest `run` entry named. */
  private logState: LogState | undefined;
  private loggedRun: string | undefined;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly workflowId: string,
    private readonly settings: FollowerSettings,
    private readonly metrics: FollowMetrics,
    /** Told once, when the stream is done, whatever ended it. */
    private readonly onDone: (follower: Follower) => void,
  ) {}

  get following(): boolean {
    return this.mode === 'following';
  }

  get done(): boolean {
    return this.mode === 'done';
  }

  /**
   * FeedMember: a batch follows. A follower still holding more than the buffer's bound unread
   * from the batches before is dropped: a burst is written whole (its client could take
   * nothing in between), so what a follower holds is at most the bound and one batch.
   */
  batch(): void {
    if ((this.mode === 'following' || this.mode === 'waiting') && (this.sink as FollowSink).buffered > this.settings.bufferBytes) this.drop('slow');
  }

  /** FeedMember: an entry, in order. */
  receive(entry: FollowEntry): void {
    if (this.mode === 'done') return;
    if (this.mode === 'joining') {
      this.pending.push(entry);
      this.pendingBytes += entry.data.length;
      if (this.pendingBytes > this.settings.bufferBytes) this.drop('slow');
      return;
    }
    this.send(entry);
    this.follow();
  }

  /** FeedMember: entries were lost; the next checkpoint stands for them. */
  lost(): void {
    if (this.mode === 'done' || this.resyncNext) return;
    this.resyncNext = true;
    this.metrics.followResyncs.inc();
  }

  /** FeedMember: no run is in flight and none reported for a while (its holder died): wait for the next. */
  noRunInFlight(): void {
    if (this.mode === 'following') this.waitForRun();
  }

  /**
   * Goes live on `sink`: replays what `read` holds for position `after`, then what came
   * meanwhile, then decides whether a run is followed (`inFlight`: the run in flight now,
   * by its record or this replica's registry).
   */
  async start(sink: FollowSink, read: LogRead, after: number | undefined, inFlight: string | undefined): Promise<void> {
    this.sink = sink;
    this.logState = read.state;
    this.loggedRun = read.run ? runIdOf(read.run) : undefined;
    for (const entry of this.replayOf(read, after)) {
      this.send(entry);
      // Backpressure, not a drop, while replaying: the backlog is bounded, and it is the client's own.
      if (sink.buffered > this.settings.bufferBytes) await sink.drained();
      if (this.mode === 'done') return;
    }
    while (this.pending.length > 0) {
      const pending = this.pending;
      this.pending = [];
      this.pendingBytes = 0;
      for (const entry of pending) this.send(entry);
      if (sink.buffered > this.settings.bufferBytes) await sink.drained();
      if (this.mode === 'done') return;
    }
    const newRun = inFlight !== undefined && inFlight !== this.loggedRun;
    if (this.logState === 'open' || newRun) this.mode = 'following';
    else this.waitForRun();
  }

  keepalive(): void {
    if (this.mode === 'done' || this.mode === 'joining' || !this.sink) return;
    if (this.sink.buffered > this.settings.bufferBytes) this.drop('slow');
    else this.sink.write(KEEPALIVE_FRAME);
  }

  /** The gateway ends the stream (drain, closing): cleanly, without `idle`, so the client resumes. */
  end(why: FollowDropReason): void {
    if (this.mode === 'done') return;
    this.metrics.followerDropped(why);
    this.finish();
    this.sink?.end();
  }

  /** The client went. */
  closed(): void {
    if (this.mode !== 'done') this.finish();
  }

  /** What joining replays: see the file's comment. */
  private replayOf(read: LogRead, after: number | undefined): FollowEntry[] {
    const snapshot = [read.run, read.checkpoint].filter((e): e is FollowEntry => e !== undefined).sort((a, b) => a.id - b.id);
    if (after === undefined) return [...snapshot, ...read.entries];
    this.last = after;
    if (read.last !== undefined && after <= read.last && (after === read.last || read.entries[0]?.id === after + 1)) return read.entries;
    // Older than the backlog (or than any log, or from another log): the latest checkpoint stands for what is gone.
    this.lost();
    if (read.last !== undefined && after > read.last) this.last = undefined;
    const from = this.last ?? 0;
    const kept = snapshot.filter((e) => e.id > from);
    const past = Math.max(from, ...kept.map((e) => e.id));
    return [...kept, ...read.entries.filter((e) => e.id > past)];
  }

  /** Writes an entry past the last sent. */
  private send(entry: FollowEntry): void {
    if (this.last !== undefined && entry.id <= this.last) return;
    const sink = this.sink as FollowSink;
    if (entry.kind === 'checkpoint' && this.resyncNext) {
      sink.write(sseFrame(entry.kind, markedResync(entry.data), entry.id));
      this.resyncNext = false;
    } else {
      sink.write(frameOf(entry));
    }
    this.metrics.followEvent(entry.kind);
    this.last = entry.id;
    this.logState = stateAfter(entry);
    if (entry.kind === 'run') this.loggedRun = runIdOf(entry);
  }

  /** After a live entry: an end waits for the next run, or ends the stream; anything else is a run going on. */
  private follow(): void {
    if (this.logState === 'final') this.sendIdle();
    else if (this.logState === 'resumable') this.waitForRun();
    else {
      clearTimeout(this.idleTimer);
      this.idleTimer = undefined;
      this.mode = 'following';
    }
  }

  private waitForRun(): void {
    this.mode = 'waiting';
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.sendIdle(), this.settings.idleMs);
  }

  private sendIdle(): void {
    if (this.mode === 'done') return;
    this.sink?.write(sseFrame('idle', JSON.stringify({ workflow_id: this.workflowId })));
    this.metrics.followEvent('idle');
    this.finish();
    this.sink?.end();
  }

  private drop(why: FollowDropReason): void {
    if (this.mode === 'done') return;
    this.metrics.followerDropped(why);
    this.finish();
    this.sink?.destroy();
  }

  private finish(): void {
    this.mode = 'done';
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    this.pending = [];
    this.onDone(this);
  }
}
