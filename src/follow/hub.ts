/**
 * Following runs, for the whole process (docs/spec.md §14): any workflow's runs live, from any
 * replica, across its segments. It holds both sides of it:
 *
 * - the followers' side: follow streams (follower.ts), grouped by workflow in feeds (feed.ts)
 *   that take the workflow's log live; the caps on them; one keepalive timer for them all;
 * - the holder's side: the publisher (publisher.ts), through which this replica's runs of a
 *   followed workflow report to its log (log.ts);
 *
 * and between them, interest (interest.ts): every ANNOUNCE_MS this replica announces the
 * workflows it has followers of, to every replica, and keeps their logs alive; what nobody
 * announced for INTEREST_TTL_MS is no longer reported. A workflow nobody follows costs
 * nothing here: no timer runs while nothing is followed, and its runs hold no reporter.
 */
import type { CoordinationBackend } from '../coordination/backend';
import { GatewayError } from '../core/errors';
import type { FollowDropReason } from './words';
import type { RunEvents, RunFollowSource, FollowableRun } from '../run/run-events';
import type { RunRegistry } from '../run/registry';
import { Feed } from './feed';
import { Interest } from './interest';
import { MemoryFollowLog } from './memory-log';
import type { Announcement, LogRead, FollowLog } from './log';
import { FollowPublisher } from './publisher';
import { Follower, type FollowSink } from './follower';
import type { FollowMetrics } from './metrics';
import type { FollowSettings } from './settings';

/** How often a replica announces its followers (and keeps their logs). */
const ANNOUNCE_MS = 2_000;
/**
 * How long an announcement holds, and a log outlives its making or its last touch: five
 * announcements, so a lost one or two change nothing; also how long a client that lost its
 * stream (or whose replica drained) has to resume and find every event since.
 */
export const INTEREST_TTL_MS = 10_000;
/** A run followed but silent this long: is one still in flight? (A holder killed leaves no `end`.) */
const QUIET_MS = 15_000;
/** A workflow's log is subscribed to within this, or the follow answers 503. */
const SUBSCRIBE_TIMEOUT_MS = 5_000;
/** Workflows per announcement message. */
const ANNOUNCE_CHUNK = 500;

export interface FollowDeps {
  log: FollowLog;
  registry: RunRegistry;
  /** Run records: whether a run of a workflow is in flight on any replica. */
  backend: CoordinationBackend;
  metrics: FollowMetrics;
  replicaId: string;
  settings: FollowSettings;
}

/** One follow stream to open (route.ts). */
export interface FollowRequest {
  workflowId: string;
  /** The client's position (Last-Event-ID or ?after=); undefined: from now. */
  after: number | undefined;
  /** Aborted when the client goes. */
  signal: AbortSignal;
  /** Writes the stream's head and returns it; called once the log was read (a failure before is an error status). */
  open(): FollowSink;
}

function storeError(err: unknown): GatewayError {
  return new GatewayError('LOCK_UNAVAILABLE', 'the follow log is unavailable; retry shortly', { cause: err });
}

export class Follow implements RunFollowSource {
  private readonly interest = new Interest();
  private readonly publisher: FollowPublisher;
  private readonly feeds = new Map<string, Feed>();
  /** Every follower, joining or streaming. */
  private readonly followers = new Set<Follower>();
  /** Those whose stream is open (longrun_followers_open). */
  private readonly streaming = new Set<Follower>();
  /** Streams held or being opened, in all and by workflow: what the caps count. */
  private held = 0;
  private readonly heldByWorkflow = new Map<string, number>();
  private ticker: NodeJS.Timeout | undefined;
  private keepalives: NodeJS.Timeout | undefined;
  private closing: Promise<void> | undefined;

  constructor(private readonly deps: FollowDeps) {
    this.publisher = new FollowPublisher({
      log: deps.log,
      interest: this.interest,
      registry: deps.registry,
      metrics: deps.metrics,
      replicaId: deps.replicaId,
      appended: (workflowId, entries) => this.feeds.get(workflowId)?.receive(entries),
    });
    deps.log.onEntries((workflowId, entries) => this.feeds.get(workflowId)?.receive(entries));
    deps.log.onAnnouncement((message) => this.heard(message));
    deps.log.onResubscribed(() => {
      for (const feed of this.feeds.values()) feed.catchUp();
    });
  }

  /** RunFollowSource: a reporter for a run whose workflow someone follows; undefined otherwise. */
  eventsFor(run: FollowableRun): RunEvents | undefined {
    return this.publisher.eventsFor(run);
  }

  /** Followers of `workflowId` on every replica, as announced (/runs). */
  followersOf(workflowId: string): number {
    return this.interest.followers(workflowId);
  }

  /** What the follow holds now (tests: nothing for workflows nobody follows). */
  get stats(): { followers: number; feeds: number; reporting: number; followed: number; timers: number } {
    return {
      followers: this.followers.size,
      feeds: this.feeds.size,
      reporting: this.publisher.size,
      followed: this.interest.size,
      timers: (this.ticker ? 1 : 0) + (this.keepalives ? 1 : 0),
    };
  }

  /** What the follow holds, entry by entry (/debug/structures): every count is 0 once nothing is followed here or elsewhere. */
  get structures(): Record<string, number> {
    const publisher = this.publisher.held;
    return {
      ...this.stats,
      streaming: this.streaming.size,
      reservations: this.held,
      reserved_workflows: this.heldByWorkflow.size,
      publisher_pending: publisher.pending,
      publisher_lost: publisher.lost,
      ...(this.deps.log instanceof MemoryFollowLog ? { memory_logs: this.deps.log.size } : {}),
    };
  }

  /**
   * Takes a place for a follow stream of `workflowId`; throws CAPACITY_EXHAUSTED (503) past
   * either cap. The returned release gives it back, once.
   */
  reserve(workflowId: string): () => void {
    const { maxFollowers, maxFollowersPerWorkflow } = this.deps.settings;
    if (this.held >= maxFollowers) {
      this.deps.metrics.capRejection('followers');
      throw new GatewayError('CAPACITY_EXHAUSTED', 'this instance holds its maximum of follow streams');
    }
    const ofWorkflow = this.heldByWorkflow.get(workflowId) ?? 0;
    if (ofWorkflow >= maxFollowersPerWorkflow) {
      this.deps.metrics.capRejection('workflow_followers');
      throw new GatewayError('CAPACITY_EXHAUSTED', 'this workflow has its maximum of follow streams on this instance');
    }
    this.held += 1;
    this.heldByWorkflow.set(workflowId, ofWorkflow + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held -= 1;
      const left = (this.heldByWorkflow.get(workflowId) ?? 1) - 1;
      if (left > 0) this.heldByWorkflow.set(workflowId, left);
      else this.heldByWorkflow.delete(workflowId);
    };
  }

  /**
   * Opens a follow stream: joins the workflow's feed, reads its log, opens the stream and
   * replays, then streams live until the follower is done. `release` (the reservation) is
   * given back when it is. Throws LOCK_UNAVAILABLE when the log cannot be read or the
   * interest not announced (nothing was written then); resolves once the stream is live, or
   * the client went.
   *
   * The stream's head is written only once the store has taken this follow's announcement:
   * a client that opens the follow and then dispatches the run knows, from the head on,
   * that the replica which takes the run has heard of it before the run starts (docs/spec.md
   * §14, "open the follow, then dispatch"), so the run reports from its `run` event on.
   */
  async open(request: FollowRequest, release: () => void): Promise<void> {
    const { workflowId } = request;
    let feed = this.feeds.get(workflowId);
    if (!feed) this.feeds.set(workflowId, (feed = new Feed(workflowId, this.deps.log)));
    const joined = feed;
    const follower = new Follower(workflowId, this.deps.settings, this.deps.metrics, () => {
      request.signal.removeEventListener('abort', onAbort);
      this.done(follower, joined, release);
    });
    const onAbort = (): void => follower.closed();
    request.signal.addEventListener('abort', onAbort, { once: true });
    this.followers.add(follower);
    joined.members.add(follower);
    // At once, not at the next tick: a run of it here reports from now on, one elsewhere once
    // the announcement is taken (awaited below, before the head); /runs counts this follower.
    const announced = this.announce([workflowId]);
    let read: LogRead;
    let inFlight: string | undefined;
    try {
      await Promise.all([this.subscribed(joined), announced]);
      [read, inFlight] = await Promise.all([this.deps.log.read(workflowId, request.after), this.inFlight(workflowId)]);
    } catch (err) {
      follower.closed();
      throw storeError(err);
    }
    joined.noteRead(read.last);
    if (follower.done || request.signal.aborted) {
      follower.closed();
      return;
    }
    const sink = request.open();
    this.streaming.add(follower);
    this.deps.metrics.followersOpen.inc();
    this.keepalives ??= setInterval(() => {
      for (const w of this.streaming) w.keepalive();
    }, this.deps.settings.keepaliveMs);
    this.keepalives.unref();
    await follower.start(sink, read, request.after, inFlight);
  }

  /** Ends every follow stream (the drain, closing): cleanly, so each client resumes elsewhere. */
  endAll(why: FollowDropReason): void {
    for (const follower of [...this.followers]) follower.end(why);
  }

  /** Stops every timer, ends what is open, closes the log. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.ticker);
      this.ticker = undefined;
      this.endAll('closing');
      await this.deps.log.close();
    })();
    return this.closing;
  }

  private subscribed(feed: Feed): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error('the follow log did not subscribe in time')), SUBSCRIBE_TIMEOUT_MS);
    });
    return Promise.race([feed.subscribed, late]).finally(() => clearTimeout(timer));
  }

  /** The run of `workflowId` in flight, here or (its record says) on any replica; undefined when none or unknown. */
  private async inFlight(workflowId: string): Promise<string | undefined> {
    const local = this.deps.registry.runsOf(workflowId)[0];
    if (local) return local.id;
    return (await this.deps.backend.readRunRecord(workflowId))?.run_id;
  }

  private done(follower: Follower, feed: Feed, release: () => void): void {
    release();
    this.followers.delete(follower);
    if (this.streaming.delete(follower)) this.deps.metrics.followersOpen.dec();
    feed.members.delete(follower);
    if (feed.members.size === 0 && this.feeds.get(feed.workflowId) === feed) {
      // Its interest lapses by itself, INTEREST_TTL_MS from the last announcement: a client back within it misses nothing.
      feed.close();
      this.feeds.delete(feed.workflowId);
    }
    if (this.streaming.size === 0) {
      clearInterval(this.keepalives);
      this.keepalives = undefined;
    }
  }

  /**
   * Says to every replica (this one at once, synchronously) which of these workflows this
   * replica has followers of, and how many. Resolves once the store took every message;
   * rejects when it failed (the next announcement repeats it).
   */
  private announce(workflowIds: readonly string[]): Promise<void> {
    const workflows: Array<[string, number]> = [];
    for (const id of workflowIds) {
      const followers = this.feeds.get(id)?.members.size ?? 0;
      if (followers > 0) workflows.push([id, followers]);
    }
    if (workflows.length === 0) return Promise.resolve();
    this.heard({ replica: this.deps.replicaId, workflows });
    const sent: Array<Promise<void>> = [];
    for (let i = 0; i < workflows.length; i += ANNOUNCE_CHUNK) {
      sent.push(this.deps.log.announce({ replica: this.deps.replicaId, workflows: workflows.slice(i, i + ANNOUNCE_CHUNK) }));
    }
    return Promise.all(sent).then(() => undefined);
  }

  private heard(message: Announcement): void {
    if ('hello' in message) {
      if (message.replica !== this.deps.replicaId) this.announce([...this.feeds.keys()]).catch(() => undefined);
      return;
    }
    const gained = this.interest.note(message.replica, message.workflows, Date.now() + INTEREST_TTL_MS);
    if (gained.length > 0) this.publisher.followed(gained);
    this.tickOn();
  }

  private tickOn(): void {
    if (this.ticker || this.closing) return;
    this.ticker = setInterval(() => this.tick(), ANNOUNCE_MS);
    this.ticker.unref();
  }

  /** Every ANNOUNCE_MS while anything is followed: announce and keep our logs, forget lapsed interest, check quiet runs. */
  private tick(): void {
    const now = Date.now();
    if (this.feeds.size > 0) {
      const ids = [...this.feeds.keys()];
      this.announce(ids).catch(() => undefined);
      this.deps.log.touch(ids);
    }
    const lost = this.interest.expire(now);
    if (lost.length > 0) this.publisher.unfollowed(lost);
    for (const feed of this.feeds.values()) {
      if (now - feed.lastEntryAt < QUIET_MS || now - feed.lastCheckAt < QUIET_MS) continue;
      if (![...feed.members].some((member) => member.following)) continue;
      feed.lastCheckAt = now;
      this.inFlight(feed.workflowId).then(
        (run) => {
          if (run === undefined) for (const member of feed.members) member.noRunInFlight();
        },
        () => undefined,
      );
    }
    if (this.feeds.size === 0 && this.interest.size === 0) {
      clearInterval(this.ticker);
      this.ticker = undefined;
    }
  }
}
