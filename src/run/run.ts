/**
 * A Run is one turn in flight: its workflow stream, its reservation (lock, lease, slots),
 * its timers and its teardown. Its life is one state field with guarded transitions:
 *
 *   starting ──markRunning()──► running          (detached: accepted; blocking: streaming)
 *   starting | running ──stop(cause) / cancel()──► stopping   (the end reason is decided here)
 *   any ──the call ends──► ended                 (teardown, once)
 *
 * Every way a run can end goes through here:
 *
 *   the stream ends by itself      → finished / workflow_unavailable / stream_error
 *   stop(cause): run limit, drain,   → stop handshake (workflow/workflow-stream.ts), then teardown
 *     lock lost, the owner's stop
 *   cancel(): the caller hung up   → client_gone
 *
 * Teardown notes the actions still unanswered (SPEC §6 `in_flight`), clears timers,
 * aborts in-flight relays and MCP calls, ends the run's MCP sessions, gives the
 * reservation back (lock, run record, actor slot, detached slot), leaves the registry,
 * then hands over to run-end.ts (metrics, the run's log line, the segment-end callback).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../log';
import type { Metrics } from '../metrics';
import type { OwnerClient } from '../owner/owner-client';
import type { CoordinationBackend, LeaseRefresh } from '../coordination/backend';
import type { Lease, LeaseHooks } from '../coordination/lease';
import type { StopListener, StopWatcher } from '../coordination/stop-watcher';
import type { McpToolbox } from '../owner/mcp/toolbox';
import type { EndReason, StopOutcome, Transport } from '../vocabulary';
import type { Action, StartWorkflowRequest } from '../workflow/contract';
import { WorkflowStream, type CallHandle, type StreamEnd } from '../workflow/workflow-stream';
import type { AcceptanceListener } from './acceptance';
import { errorAnswer } from './action-server';
import type { RegisteredRun, RunInfo, RunRegistry } from './registry';
import { RunActions } from './run-actions';
import type { LimitedRun, RunLimitEntry, RunLimits } from './run-limits';
import type { Reservation } from './reservation';
import { recordRunEnd } from './run-end';
import { decideEnd, type Ending } from './end-decision';
import type { StopCause, StopReasons } from './stop-reasons';

export type RunState = 'starting' | 'running' | 'stopping' | 'ended';

/**
 * The state, with what the later states know: what longrun started to end the run (a stop
 * or a cancel, and its reason), and whether it had been accepted. The end reason itself is
 * decided at teardown (end-decision.ts): a stop may cross the service's own end.
 */
type Phase =
  | { readonly state: 'starting' }
  | { readonly state: 'running' }
  | { readonly state: 'stopping'; readonly ending: NonNullable<Ending>; readonly accepted: boolean }
  | { readonly state: 'ended'; readonly reason: EndReason; readonly accepted: boolean };

const STARTING: Phase = Object.freeze({ state: 'starting' });
const RUNNING: Phase = Object.freeze({ state: 'running' });

export interface RunResult {
  reason: EndReason;
  /** An infrastructure stop and an OK end crossed with no checkpoint saying the turn was over (end-decision.ts). */
  endedWhileStopping: boolean;
  end: StreamEnd;
  stopOutcome: StopOutcome | undefined;
  durationMs: number;
  actions: number;
}

/**
 * Where a blocking run's checkpoints go (the HTTP adapter writes them as ndjson lines).
 * `write` says whether the caller can take more: 'full' pauses the stream until
 * `drained()`, 'gone' ends the run (client_gone).
 */
export interface CheckpointSink {
  write(action: Action): 'ok' | 'full' | 'gone';
  /** Resolves when a full sink can take more. */
  drained(): Promise<void>;
}

/** What every run of this process shares: one object, built once by the launcher. */
export interface RunContext {
  owner: OwnerClient;
  metrics: Metrics;
  logger: Logger;
  registry: RunRegistry;
  backend: CoordinationBackend;
  stopWatcher: StopWatcher;
  replicaId: string;
  stopAckTimeoutMs: number;
  leaseTtlMs: number;
  /** A blocking caller that takes nothing for this long is treated as gone. */
  callerStallMs: number;
  /** Detached runs' run limits (one timer for the process). */
  runLimits: RunLimits;
  /** The words stops are sent with (SPEC §4; infrastructure ones configurable). */
  stopReasons: StopReasons;
  /** Bounds segment-end callbacks (aborted when a drain's budget runs out). */
  callbackSignal: AbortSignal;
}

/** What serving actions needs of the owner's authorization (not the whole preauth answer). */
export interface RunAccess {
  /** The user's API token (Service.Headers["x-gitlab-oauth-token"]). */
  token: string;
  timeoutHTTPRequests: boolean;
  /** X-Forwarded-For for relayed requests: the caller's chain plus its address. */
  forwardedFor: string | undefined;
}

export interface RunInit {
  workflowId: string;
  requestId: string;
  transport: Transport;
  call: CallHandle;
  /** What admission took; the run gives it back at teardown. */
  reservation: Reservation;
  /** The run's MCP sessions and tools (opened by the launcher); the run closes them at teardown. */
  mcp: McpToolbox;
  access: RunAccess;
  /** Detached runs: stopped with WORKHORSE_RUN_LIMIT at the run limit (RunContext.runLimits). */
  limited?: boolean;
  /** Blocking runs write each checkpoint to the caller. */
  sink?: CheckpointSink;
}

export class Run implements RegisteredRun, LimitedRun, StopListener, LeaseHooks {
  readonly id = randomUUID();
  readonly workflowId: string;
  readonly transport: Transport;
  readonly startedAt = Date.now();
  readonly done: Promise<RunResult>;
  private phase: Phase = STARTING;
  private actions = 0;
  private lastActionAt: number | undefined;
  /** The status of the last checkpoint the service sent: whether it said the turn was over. */
  private lastCheckpointStatus: string | undefined;
  private stopping: Promise<StopOutcome> | undefined;
  private stopStartedAt = 0;
  /** The run record write, awaited by teardown so the record is never written after release. */
  private recordWrite: Promise<void> | undefined;
  /** Set when the owner's stop signal is seen (it wins over acceptance). */
  private stopSeen = false;
  /** Told what decides acceptance, while a detached start waits for it. */
  private acceptance: AcceptanceListener | undefined;
  /** The call's final status, once it ended. */
  private endStatus: StreamEnd | undefined;
  private runLimit: RunLimitEntry | undefined;
  /** Set while reading is paused for a full sink; the timer ends a caller that stays stalled. */
  private stallTimer: NodeJS.Timeout | undefined;
  /** The actions served (relays, tool calls, what is in flight); made with the first one. */
  private served: RunActions | undefined;
  private logger: Logger | undefined;
  private readonly stream: WorkflowStream;
  private readonly lease: Lease | undefined;

  constructor(
    private readonly init: RunInit,
    private readonly ctx: RunContext,
  ) {
    this.workflowId = init.workflowId;
    this.transport = init.transport;
    this.stream = new WorkflowStream(init.call, (action) => this.onAction(action));
    // The run is its lease's hooks (methods below): no closures per run for them.
    this.lease = init.reservation.keepAlive(this);
    if (this.lease) ctx.stopWatcher.watch(init.workflowId, this);
    if (init.limited) this.runLimit = ctx.runLimits.add(this);
    ctx.registry.add(this);
    ctx.metrics.connections.inc({ transport: this.transport });
    ctx.metrics.connectionsOpen.inc({ transport: this.transport });
    ctx.metrics.runsInFlight.set({ transport: this.transport }, ctx.registry.count(this.transport));
    this.done = this.stream.ended.then((end) => this.teardown(end));
  }

  /** One child logger per run, made when first needed: workflow_id, run_id, request_id on every line. */
  private get log(): Logger {
    this.logger ??= this.ctx.logger.child({ request_id: this.init.requestId, workflow_id: this.workflowId, run_id: this.id, transport: this.transport });
    return this.logger;
  }

  /** Moves to `to` when the run is in one of `from`; false (nothing changes) otherwise. */
  private transition(from: readonly RunState[], to: Phase): boolean {
    if (!from.includes(this.phase.state)) return false;
    this.phase = to;
    return true;
  }

  /** What a stop or cancel starts: its reason, and whether the run had been accepted. */
  private ending(by: 'stop' | 'cancel', reason: EndReason): Phase {
    return { state: 'stopping', ending: { by, reason }, accepted: this.phase.state === 'running' };
  }

  /**
   * Watches for what decides detached acceptance (acceptance.ts): the first action, the
   * owner's stop signal, the stream's end — told at once when it already happened. The
   * returned function drops the listener; nothing of the wait stays with the run.
   */
  watchAcceptance(listener: AcceptanceListener): () => void {
    if (this.stopSeen) listener.stopped();
    else if (this.actions > 0) listener.firstAction();
    else if (this.phase.state === 'ended') listener.ended(this.endStatus as StreamEnd);
    else this.acceptance = listener;
    return () => {
      if (this.acceptance === listener) this.acceptance = undefined;
    };
  }

  /** The run limit was reached (RunLimits): the workflow is handed back to be resumed. */
  reachedRunLimit(): void {
    this.runLimit = undefined;
    void this.stop(this.ctx.stopReasons.infra('run_limit'));
  }

  /** Sends the startRequest; resolves 'written' once it is on an open HTTP/2 stream, 'ended' if the call ended first. */
  start(request: StartWorkflowRequest): Promise<'written' | 'ended'> {
    return this.stream.sendStart(request);
  }

  /**
   * starting → running: the run was accepted (detached 202) or is streaming (blocking),
   * and its record is written. Resolves true once the record is stored (or failed to
   * be: logged, never thrown), so a 202 is never answered before the record can be read;
   * false when the run had already left `starting` (stopping or ended: not accepted).
   */
  async markRunning(): Promise<boolean> {
    if (!this.transition(['starting'], RUNNING)) return false;
    if (this.lease) {
      const record = {
        run_id: this.id,
        replica: this.ctx.replicaId,
        transport: this.transport,
        state: 'running',
        started_at: new Date(this.startedAt).toISOString(),
        last_action_at: this.lastActionIso(),
        in_flight: this.inFlightJson(),
      };
      this.recordWrite = this.ctx.backend.writeRunRecord(this.workflowId, record, this.ctx.leaseTtlMs).catch((err: unknown) => {
        this.log.warn({ err }, 'run record not written');
      });
      await this.recordWrite;
    }
    return true;
  }

  /**
   * The owner's stop signal: the run acting on it deletes the key, then stops with the
   * key's value as the user reason.
   */
  stopSignalSeen(value: string): void {
    if (this.phase.state !== 'starting' && this.phase.state !== 'running') return;
    this.stopSeen = true;
    this.acceptance?.stopped();
    this.ctx.backend.clearStop(this.workflowId).catch(() => undefined);
    void this.stop(this.ctx.stopReasons.user(value));
  }

  /** LeaseHooks: the lock is gone (taken over, or not renewed in time): stop with WORKHORSE_LOCK_LOST. */
  onLost(why: 'taken' | 'expired'): void {
    this.ctx.metrics.lock('renew', 'lost');
    this.log.warn({ why }, 'lease lost: stopping the run');
    void this.stop(this.ctx.stopReasons.infra('lock_lost'), this.lockLostAckTimeoutMs());
  }

  /** LeaseHooks: a renewal found the owner's stop key. */
  onStop(value: string): void {
    this.stopSignalSeen(value);
  }

  /** LeaseHooks: a renewal's outcome, counted. */
  onRenew(result: 'ok' | 'error'): void {
    this.ctx.metrics.lock('renew', result);
  }

  /** LeaseHooks: what a renewal refreshes in the run record. */
  refresh(): Omit<LeaseRefresh, 'actor'> {
    return { runId: this.id, state: this.phase.state, lastActionAt: this.lastActionIso(), inFlight: this.inFlightJson() };
  }

  /**
   * A lost lease may be taken by another run once it expires: the handshake must end
   * before that, so it gets what is left of the lease, not the full ack timeout.
   */
  private lockLostAckTimeoutMs(): number {
    const left = this.lease ? this.lease.remainingMs - 50 : 0;
    return Math.max(1, Math.min(this.ctx.stopAckTimeoutMs, left));
  }

  /** The run record's `in_flight` (JSON text): as of the record write or the last lease renewal. */
  private inFlightJson(): string {
    return JSON.stringify(this.served?.inFlight() ?? []);
  }

  private lastActionIso(): string {
    return this.lastActionAt === undefined ? '' : new Date(this.lastActionAt).toISOString();
  }

  info(): RunInfo {
    return {
      workflow_id: this.workflowId,
      run_id: this.id,
      transport: this.transport,
      state: this.phase.state,
      started_at: new Date(this.startedAt).toISOString(),
      last_action_at: this.lastActionAt === undefined ? null : new Date(this.lastActionAt).toISOString(),
      actions: this.actions,
    };
  }

  /**
   * Stops the run for `cause` (its reason sent as StopWorkflowRequest.reason) through the stop
   * handshake. The first stop or cancel decides the end; later calls wait for the same
   * end. Resolves when teardown is complete.
   */
  stop(cause: StopCause, ackTimeoutMs: number = this.ctx.stopAckTimeoutMs): Promise<RunResult> {
    if (this.transition(['starting', 'running'], this.ending('stop', cause.end))) {
      this.stopStartedAt = performance.now();
      this.stopping = this.stream.stop(cause.reason, ackTimeoutMs);
    }
    return this.done;
  }

  /**
   * Cancels the stream at once, without the handshake: the caller hung up or stalled
   * (`client_gone`, the default; also the process closing), or the service never took
   * the stream (`workflow_unavailable`). A stop or cancel already under way keeps its reason.
   */
  cancel(reason: EndReason = 'client_gone'): void {
    this.transition(['starting', 'running'], this.ending('cancel', reason));
    this.stream.cancel();
  }

  private onAction(action: Action): void {
    this.actions += 1;
    this.lastActionAt = Date.now();
    if (this.actions === 1) this.acceptance?.firstAction();
    if (action.action === 'newCheckpoint') {
      this.lastCheckpointStatus = action.newCheckpoint?.status;
      this.ctx.metrics.action('newCheckpoint');
      if (this.init.sink) this.deliver(this.init.sink, action);
      return;
    }
    this.serve(action);
  }

  /**
   * Hands a checkpoint to the blocking caller. A full sink pauses reading from the
   * service (HTTP/2 flow control then slows it) until the caller has taken the lines;
   * a caller that takes nothing for callerStallMs, or is gone, ends the run.
   */
  private deliver(sink: CheckpointSink, action: Action): void {
    const taken = sink.write(action);
    if (taken === 'gone') {
      this.cancel('client_gone');
      return;
    }
    if (taken === 'ok' || this.stallTimer) return;
    this.stream.pause();
    this.stallTimer = setTimeout(() => {
      this.log.warn({ stall_ms: this.ctx.callerStallMs }, 'blocking caller took nothing: ending the run');
      this.cancel('client_gone');
    }, this.ctx.callerStallMs);
    void sink.drained().then(() => {
      clearTimeout(this.stallTimer);
      this.stallTimer = undefined;
      if (this.phase.state !== 'ended') this.stream.resume();
    });
  }

  /** Checks the stop key, then serves the action; the answer is written exactly once. */
  private serve(action: Action): void {
    if (!this.lease) {
      this.serveChecked(action);
      return;
    }
    this.ctx.backend.readStop(this.workflowId).then(
      (stop) => {
        if (stop !== null) this.stopSignalSeen(stop);
        this.serveChecked(action);
      },
      () => this.serveChecked(action),
    );
  }

  /** Serves an action whose stop check is done: refused once the run is stopping. */
  private serveChecked(action: Action): void {
    if (this.phase.state !== 'starting' && this.phase.state !== 'running') {
      this.ctx.metrics.action(action.action ?? 'unknown');
      this.stream.respond(errorAnswer(action, 'request aborted: the run is stopping'));
      return;
    }
    this.served ??= new RunActions(
      {
        owner: this.ctx.owner,
        metrics: this.ctx.metrics,
        workflowId: this.workflowId,
        requestId: this.init.requestId,
        token: this.init.access.token,
        timeoutHTTPRequests: this.init.access.timeoutHTTPRequests,
        mcp: this.init.mcp,
        forwardedFor: this.init.access.forwardedFor,
      },
      this.stream,
      () => this.log,
    );
    void this.served.serve(action);
  }

  /** Runs once, when the call has ended: gives everything back, then records the end. */
  private async teardown(end: StreamEnd): Promise<RunResult> {
    const phase = this.phase;
    const decision = decideEnd({
      ending: phase.state === 'stopping' ? phase.ending : undefined,
      code: end.code,
      stopReachedService: this.stream.stopReachedService,
      lastCheckpointStatus: this.lastCheckpointStatus,
    });
    const ended = { reason: decision.reason, accepted: phase.state === 'stopping' ? phase.accepted : phase.state === 'running' };
    this.phase = { state: 'ended', ...ended };
    this.endStatus = end;
    this.acceptance?.ended(end);
    // Before the abort below answers them "request aborted": their outcome is unknown.
    const inFlight = this.served?.inFlight() ?? [];
    if (this.runLimit) this.ctx.runLimits.remove(this.runLimit);
    clearTimeout(this.stallTimer);
    if (this.lease) this.ctx.stopWatcher.unwatch(this.workflowId, this);
    this.served?.end();
    // Sessions end (DELETE) while the rest is given back; bounded, never rejects.
    const mcpClosed = this.init.mcp.close();
    // A stop that did not decide the end (the service had ended by itself) counts no outcome.
    const handshake = this.stopping ? await this.stopping : undefined;
    const stopOutcome = decision.byStop ? handshake : undefined;
    if (stopOutcome) this.ctx.metrics.stopAck(stopOutcome, (performance.now() - this.stopStartedAt) / 1000);
    await this.recordWrite;
    await Promise.all([this.init.reservation.release(this.id), mcpClosed]);
    this.ctx.registry.remove(this);
    const result: RunResult = {
      reason: ended.reason,
      endedWhileStopping: decision.endedWhileStopping,
      end,
      stopOutcome,
      durationMs: Date.now() - this.startedAt,
      actions: this.actions,
    };
    await recordRunEnd(this.ctx, () => this.log, {
      workflowId: this.workflowId,
      runId: this.id,
      requestId: this.init.requestId,
      transport: this.transport,
      // Only accepted runs are called back: an end before the 202 was answered to the dispatcher itself.
      callback: this.transport === 'detached' && ended.accepted,
      inFlight,
      ...result,
    });
    return result;
  }
}
