/**
 * A reference dispatcher on BullMQ: what an owner service runs to drive longrun's
 * detached turns (docs/owner-integration.md). Three jobs and one endpoint:
 *
 *   segment job   execute() one segment of a turn with longrun/client. 202 → the run is
 *                 the turn's, a watchdog is scheduled; 409 WORKFLOW_LOCKED → the run in
 *                 flight is the turn: adopted (getRun), not retried; 200 finished and
 *                 409 STOPPED end the turn; a retryable failure past the client's
 *                 deadline fails the job and BullMQ tries it again later — never before
 *                 the failure's Retry-After (the owner's rate limit: segmentBackoffMs).
 *   callback      the segment-end endpoint (segment-end-route.ts): a resumable reason
 *                 enqueues the next segment once per (workflow, run id) — the BullMQ job
 *                 id `resume-<workflow>-<run>` is the idempotency key — carrying the
 *                 run's `in_flight` in workflowMetadata.resume; a final reason ends it.
 *   watchdog job  every `watchPeriodMs` while a run is the turn's: a turn still waiting on
 *                 a run whose record is gone (no run holds the workflow, or another one
 *                 does) twice, `lostConfirmMs` apart, lost its callback; the run's end is
 *                 recorded as `lost` and the next segment enqueued under the same job id
 *                 the callback would have used. The period stays well under GitLab's
 *                 stuck-workflow cleanup (a workflow `running` for 30 minutes without an
 *                 update is failed): a callback lost early in a segment must not wait for
 *                 the run limit to be noticed, nor for the next segment's re-dispatch,
 *                 which a rate-limited owner can stretch over minutes, on top.
 *
 * Owner state lives in Redis (owner-state.ts); every step is idempotent, so the
 * callback, the worker and the watchdog may race on a run and each boundary still costs
 * exactly one resume.
 */
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { LongrunError, isResumable, type ExecuteResult, type InFlightEntry, type LongrunClient, type SegmentEnd } from '@longrun/client';
import { OwnerState, type EndVia, type Turn, type TurnRequest, type TurnStatus } from './owner-state';

export interface DispatcherOptions {
  client: LongrunClient;
  /** Redis for the queue and the owner state. */
  redisUrl: string;
  /** Key prefix of the owner state and the queue (default longrun-example). */
  prefix?: string;
  /**
   * How often the watchdog looks at a run believed in flight, from its acceptance (default
   * 300 000 ms). With `lostConfirmMs`, under 30 minutes (the constructor throws otherwise):
   * GitLab fails a workflow left `running` that long without an update.
   */
  watchPeriodMs?: number;
  /**
   * A run whose record stays gone this long has lost its callback (default 90 000 ms). Longer
   * than the callback's 3 attempts (about 6.4 s), and than one lease TTL (60 s): after the
   * gateways' Redis lost its data, a live run's record is missing until its next renewal
   * writes it again, and a run found gone then is not gone.
   */
  lostConfirmMs?: number;
  /** Jobs worked at once (default 16). */
  concurrency?: number;
  /** A turn needing more segments is given up (default 500: a turn that never progresses must not loop forever). */
  maxSegments?: number;
  /** Attempts of one segment job (default 8), each with the client's own retries. */
  jobAttempts?: number;
  /** Told of everything the dispatcher does. */
  onEvent?: (event: DispatcherEvent) => void;
  /**
   * Whether the workflow is over on the owner's side (in Rails: its status, which the
   * workflow service keeps). Asked only for a callback with `ended_while_stopping`: the
   * gateway's stop crossed the service's OK end and nothing said whether the turn had
   * finished. Without it such a segment is resumed, and the service answers a resume of a
   * finished workflow harmlessly.
   */
  workflowFinished?: (workflowId: string) => Promise<boolean>;
}

export type DispatcherEvent =
  | { type: 'turn_started'; workflowId: string }
  | { type: 'segment_accepted'; workflowId: string; runId: string; segment: number; resumed: boolean; adopted: boolean; endpoint: string; attempts: number }
  | { type: 'segment_ended'; workflowId: string; runId: string; reason: string; inFlight: InFlightEntry[]; via: EndVia; checked?: boolean }
  | { type: 'resume_enqueued'; workflowId: string; after: string; reason: string; inFlight: InFlightEntry[] }
  | { type: 'turn_ended'; workflowId: string; status: TurnStatus; reason: string }
  | { type: 'watchdog'; workflowId: string; runId: string; finding: 'alive' | 'absent' | 'lost' | 'unknown' }
  | { type: 'job_skipped'; workflowId: string; why: string }
  | { type: 'dispatch_error'; workflowId: string; code: string; message: string; willRetry: boolean };

interface SegmentJob {
  workflowId: string;
  /** The run this segment resumes (absent for a turn's first). */
  after?: string;
  reason?: string;
  inFlight?: InFlightEntry[];
}

interface WatchdogJob {
  workflowId: string;
  runId: string;
  check: number;
  /** When the run was first found gone. */
  absentSince?: number;
}

const open = (status: TurnStatus): boolean => status === 'dispatching' || status === 'running';
/** GitLab's CleanStuckWorkflowsService: a workflow `created` or `running` this long without an update is failed. */
export const STUCK_WORKFLOW_MS = 30 * 60_000;
/** The watchdog's defaults: a lost callback is noticed within 6.5 minutes (DispatcherOptions). */
export const DEFAULT_WATCH_PERIOD_MS = 300_000;
export const DEFAULT_LOST_CONFIRM_MS = 90_000;

/** The segment jobs' backoff, a strategy of the worker's own (BullMQ calls it with the job's error). */
const SEGMENT_BACKOFF = 'segment';

/**
 * How long BullMQ waits before a failed segment job's next attempt: exponential from 1 s,
 * and never less than the Retry-After the failure carried — the owner's 429 (Rails
 * rate-limits the execute preauth: 50 a minute a user, Retry-After 60) is waited out,
 * not retried into.
 */
export function segmentBackoffMs(attemptsMade: number, err: Error | undefined): number {
  const exponential = 1_000 * 2 ** Math.max(0, attemptsMade - 1);
  const retryAfterMs = err instanceof LongrunError && err.retryAfterS !== undefined ? err.retryAfterS * 1_000 : 0;
  return Math.max(exponential, retryAfterMs);
}
/** BullMQ job ids may not contain ':'; request ids keep to ^[A-Za-z0-9_-]{1,64}$. */
const safe = (id: string): string => id.replace(/[^A-Za-z0-9_-]/g, '_');

export class Dispatcher {
  readonly state: OwnerState;
  private readonly queue: Queue;
  private readonly worker: Worker;
  private readonly connection: Redis;
  private readonly watchPeriodMs: number;
  private readonly lostConfirmMs: number;
  private closing: Promise<void> | undefined;

  /** Throws RangeError when the watchdog would look after GitLab's stuck-workflow cleanup (before connecting anything). */
  constructor(private readonly options: DispatcherOptions) {
    this.watchPeriodMs = options.watchPeriodMs ?? DEFAULT_WATCH_PERIOD_MS;
    this.lostConfirmMs = options.lostConfirmMs ?? DEFAULT_LOST_CONFIRM_MS;
    // A lost callback is noticed within one period plus the confirmation: both must fit, with
    // room for the next segment to start, before GitLab's cleanup fails the workflow.
    if (!(this.watchPeriodMs > 0) || !(this.lostConfirmMs >= 0) || this.watchPeriodMs + this.lostConfirmMs >= STUCK_WORKFLOW_MS) {
      throw new RangeError(
        `watchPeriodMs (${this.watchPeriodMs}) + lostConfirmMs (${this.lostConfirmMs}) must be positive and under ${STUCK_WORKFLOW_MS} ms (GitLab's stuck-workflow cleanup)`,
      );
    }
    const prefix = options.prefix ?? 'longrun-example';
    // BullMQ's blocking connections need maxRetriesPerRequest null; it duplicates this one for them.
    this.connection = new Redis(options.redisUrl, { maxRetriesPerRequest: null });
    this.connection.on('error', () => undefined);
    this.state = new OwnerState(this.connection, prefix);
    const queueName = 'dispatch';
    this.queue = new Queue(queueName, {
      connection: this.connection,
      prefix,
      defaultJobOptions: { removeOnComplete: { age: 24 * 3600 }, removeOnFail: { age: 7 * 24 * 3600 } },
    });
    this.queue.on('error', () => undefined);
    this.worker = new Worker(queueName, (job: Job) => this.work(job), {
      connection: this.connection,
      prefix,
      concurrency: options.concurrency ?? 16,
      settings: { backoffStrategy: (attemptsMade, _type, err) => segmentBackoffMs(attemptsMade, err) },
    });
    this.worker.on('error', () => undefined);
    this.worker.on('failed', (job, err) => void this.onJobFailed(job, err));
  }

  /** Resolves once the queue and the worker are connected. */
  async ready(): Promise<void> {
    await Promise.all([this.queue.waitUntilReady(), this.worker.waitUntilReady()]);
  }

  /** Opens a turn of `workflowId` and enqueues its first segment; false when one is open already. */
  async startTurn(workflowId: string, request: TurnRequest): Promise<boolean> {
    if (!(await this.state.startTurn(workflowId, request))) return false;
    await this.queue.add('segment', { workflowId } satisfies SegmentJob, this.segmentJobOptions(`start-${safe(workflowId)}-${Date.now()}`));
    this.emit({ type: 'turn_started', workflowId });
    return true;
  }

  turn(workflowId: string): Promise<Turn | null> {
    return this.state.turn(workflowId);
  }

  /** What the segment-end endpoint does with a verified callback; throws (→ 5xx, the gateway retries) when it could not act. */
  async onSegmentEnd(end: SegmentEnd): Promise<void> {
    const reason = await this.checkedReason(end);
    if (await this.state.recordEnd(end.run_id, reason, end.in_flight, 'callback')) {
      const checked = end.ended_while_stopping ? { checked: true } : {};
      this.emit({ type: 'segment_ended', workflowId: end.workflow_id, runId: end.run_id, reason, inFlight: end.in_flight, via: 'callback', ...checked });
    }
    await this.advance(end.workflow_id, end.run_id);
  }

  /** A segment whose stop crossed the service's end is the turn's end if the workflow is over. */
  private async checkedReason(end: SegmentEnd): Promise<string> {
    if (!end.ended_while_stopping || !isResumable(end.reason) || !this.options.workflowFinished) return end.reason;
    return (await this.options.workflowFinished(end.workflow_id)) ? 'finished' : end.reason;
  }

  /** Stops the worker (jobs in hand finish first) and the queue, and closes the connection. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.allSettled([this.worker.close(), this.queue.close()]);
      this.connection.disconnect();
    })();
    return this.closing;
  }

  private emit(event: DispatcherEvent): void {
    this.options.onEvent?.(event);
  }

  private segmentJobOptions(jobId: string) {
    return { jobId, attempts: this.options.jobAttempts ?? 8, backoff: { type: SEGMENT_BACKOFF } };
  }

  private work(job: Job): Promise<void> {
    return job.name === 'watchdog' ? this.watch(job.data as WatchdogJob) : this.dispatch(job.data as SegmentJob, job.attemptsMade);
  }

  /** One segment: the turn's first, or the one after run `after`. */
  private async dispatch(job: SegmentJob, attemptsMade: number): Promise<void> {
    const { workflowId, after } = job;
    const turn = await this.state.turn(workflowId);
    if (!turn || !open(turn.status)) return this.emit({ type: 'job_skipped', workflowId, why: 'the turn has ended' });
    // The turn moved on (this segment was dispatched already, or another run was adopted).
    if ((after ?? '') !== turn.runId) return this.emit({ type: 'job_skipped', workflowId, why: `the turn waits on run ${turn.runId || '(none)'}` });
    if (turn.segments >= (this.options.maxSegments ?? 500)) {
      if (await this.state.closeTurn(workflowId, 'failed', 'too_many_segments')) this.emit({ type: 'turn_ended', workflowId, status: 'failed', reason: 'too_many_segments' });
      return;
    }
    const metadata = { ...turn.request.metadata, ...(after ? { resume: { after_run_id: after, reason: job.reason, in_flight: job.inFlight ?? [] } } : {}) };
    // A later segment resumes from the latest checkpoint and carries no new input: an empty
    // goal, what the workflow service reads as a resume (a goal would be a new prompt).
    const goal = after ? '' : turn.request.goal;
    let result: ExecuteResult;
    try {
      result = await this.options.client.execute(
        workflowId,
        { ...(goal === undefined ? {} : { goal }), workflowMetadata: metadata },
        { requestId: `${safe(workflowId)}-s${turn.segments}-a${attemptsMade}`.slice(-64) },
      );
    } catch (err) {
      if (!(err instanceof LongrunError)) throw err;
      this.emit({ type: 'dispatch_error', workflowId, code: String(err.code), message: err.message, willRetry: err.retryable });
      // Refused for good (invalid request, the owner's own refusal, quota): the turn cannot go on.
      if (!err.retryable) {
        if (await this.state.closeTurn(workflowId, 'failed', String(err.code))) this.emit({ type: 'turn_ended', workflowId, status: 'failed', reason: String(err.code) });
        return;
      }
      throw err;
    }
    const resumed = after !== undefined;
    switch (result.kind) {
      case 'accepted':
        return this.adopt(workflowId, result.runId, turn.segments, resumed, false, result);
      case 'finished':
        await this.state.acceptRun(workflowId, result.runId, turn.segments, resumed);
        await this.state.recordEnd(result.runId, 'finished', [], 'execute');
        this.emit({ type: 'segment_ended', workflowId, runId: result.runId, reason: 'finished', inFlight: [], via: 'execute' });
        return this.advance(workflowId, result.runId);
      case 'locked': {
        // The run in flight is the turn (e.g. our own, whose 202 was lost): adopt it.
        const record = await this.options.client.getRun(workflowId);
        if (!record) throw new Error('409 WORKFLOW_LOCKED, then no run in flight: trying again');
        // The run this segment resumes has ended but its lock outlives it (its release failed):
        // it expires within one lease TTL; BullMQ tries the job again until then.
        if (record.run_id === after) throw new Error('the run this segment resumes still holds the lock: trying again');
        return this.adopt(workflowId, record.run_id, turn.segments, resumed, true, result);
      }
      case 'stopped':
        if (await this.state.closeTurn(workflowId, 'stopped', 'stop_requested')) this.emit({ type: 'turn_ended', workflowId, status: 'stopped', reason: 'stop_requested' });
        return;
      case 'streaming':
        // The owner's preauth chose blocking mode: a dispatcher cannot hold a turn open.
        result.stream.cancel();
        if (await this.state.closeTurn(workflowId, 'failed', 'not_detached')) this.emit({ type: 'turn_ended', workflowId, status: 'failed', reason: 'not_detached' });
        return;
    }
  }

  private async adopt(workflowId: string, runId: string, segment: number, resumed: boolean, adopted: boolean, answer: { endpoint: string; attempts: number }): Promise<void> {
    if (await this.state.acceptRun(workflowId, runId, segment, resumed)) {
      this.emit({ type: 'segment_accepted', workflowId, runId, segment, resumed, adopted, endpoint: answer.endpoint, attempts: answer.attempts });
      await this.scheduleWatchdog({ workflowId, runId, check: 0 }, this.watchPeriodMs);
    }
    // Its callback may have come before we knew the run was ours.
    await this.advance(workflowId, runId);
  }

  /** Acts on a run's recorded end, if any: the next segment (once per run), or the turn's end. */
  private async advance(workflowId: string, runId: string): Promise<void> {
    const next = await this.state.advance(workflowId, runId);
    if (next.action === 'resume') {
      // Added again when repeated: the job id makes it a no-op unless the first add failed.
      await this.queue.add(
        'segment',
        { workflowId, after: runId, reason: next.reason, inFlight: next.inFlight } satisfies SegmentJob,
        this.segmentJobOptions(`resume-${safe(workflowId)}-${runId}`),
      );
      if (next.first) this.emit({ type: 'resume_enqueued', workflowId, after: runId, reason: next.reason, inFlight: next.inFlight });
    } else if (next.action === 'final') {
      this.emit({ type: 'turn_ended', workflowId, status: next.reason === 'stop_requested' ? 'stopped' : 'finished', reason: next.reason });
    }
  }

  private async scheduleWatchdog(job: WatchdogJob, delayMs: number): Promise<void> {
    await this.queue.add('watchdog', job, {
      jobId: `watchdog-${safe(job.workflowId)}-${job.runId}-${job.check}`,
      delay: delayMs,
      attempts: 3,
      backoff: { type: 'fixed', delay: 1_000 },
    });
  }

  /** The watchdog of run `runId`: recovers a lost callback, or looks again later. */
  private async watch(job: WatchdogJob): Promise<void> {
    const { workflowId, runId } = job;
    const turn = await this.state.turn(workflowId);
    if (!turn || !open(turn.status) || turn.runId !== runId || (await this.state.acted(runId))) return;
    let alive: boolean;
    try {
      // Another run holding the workflow (a WebSocket session, say) means this one has ended too.
      alive = (await this.options.client.getRun(workflowId, { retry: false }))?.run_id === runId;
    } catch {
      // The gateway or its lock store cannot tell now: look again later.
      this.emit({ type: 'watchdog', workflowId, runId, finding: 'unknown' });
      return this.scheduleWatchdog({ workflowId, runId, check: job.check + 1 }, this.watchPeriodMs);
    }
    if (alive) {
      this.emit({ type: 'watchdog', workflowId, runId, finding: 'alive' });
      return this.scheduleWatchdog({ workflowId, runId, check: job.check + 1 }, this.watchPeriodMs);
    }
    // Gone: its callback may still be on its way (the gateway releases the lock, then calls back).
    const absentSince = job.absentSince ?? Date.now();
    if (Date.now() - absentSince < this.lostConfirmMs) {
      this.emit({ type: 'watchdog', workflowId, runId, finding: 'absent' });
      return this.scheduleWatchdog({ workflowId, runId, check: job.check + 1, absentSince }, this.lostConfirmMs);
    }
    if (await this.state.recordEnd(runId, 'lost', [], 'watchdog')) {
      this.emit({ type: 'watchdog', workflowId, runId, finding: 'lost' });
      this.emit({ type: 'segment_ended', workflowId, runId, reason: 'lost', inFlight: [], via: 'watchdog' });
    }
    await this.advance(workflowId, runId);
  }

  /** A segment job out of attempts: the turn is given up (the owner's stuck-workflow cleanup would look at it). */
  private async onJobFailed(job: Job | undefined, err: Error): Promise<void> {
    if (!job || job.name !== 'segment' || job.attemptsMade < (job.opts.attempts ?? 1)) return;
    const { workflowId } = job.data as SegmentJob;
    const code = err instanceof LongrunError ? String(err.code) : 'dispatch_failed';
    if (await this.state.closeTurn(workflowId, 'failed', code).catch(() => false)) this.emit({ type: 'turn_ended', workflowId, status: 'failed', reason: code });
  }
}
