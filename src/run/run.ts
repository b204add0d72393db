/**
 * A Run is one run in flight (docs/glossary.md): its call's stream, its state, its timers and its
 * teardown; what it holds in Redis (lock, lease, stop watch, record) is its coordination
 * (coordination/run-coordination.ts). Its life is one state field with guarded transitions:
 *
 *   starting ──markRunning()──► running          (detached: accepted; blocking: streaming)
 *   starting | running ──stop(reason)──► stopping
 *   any ──the call ends──► ended                 (teardown, once; the end reason decided there)
 *
 * Every stop enters through `stop(reason)` (the StopReason union, stop-reasons.ts), whoever
 * decides it: the run limits, the drain, the coordination (lock lost; the owner's stop
 * key seen by a renewal, the stop watcher or the check before an action), the caller's
 * adapter (gone or stalled), the launcher (the service never took the stream). A stop of
 * run limit, drain, lost lock or the owner's is the handshake (workflow-stream.ts); the
 * others cancel the call at once. A call that ends by itself is finished,
 * workflow_unavailable or stream_error; end-decision.ts decides when a stop crossed it.
 *
 * Teardown notes the actions still unanswered (docs/spec.md §6 `in_flight`), clears
 * timers, aborts in-flight relays and MCP calls, ends the run's MCP sessions, gives the
 * coordination back (stop watch, lock, run record, actor and process slots), leaves the
 * registry, then hands over to run-end.ts (metrics, the run's log line, the segment-end
 * callback).
 */
import { correlation, type Logger } from '../core/log';
import type { RunMetrics } from './metrics';
import type { TraceLink, TraceSpan, Tracing } from '../observability/tracing';
import type { OwnerClient } from '../owner/owner-client';
import type { RunCoordination } from '../coordination/run-coordination';
import type { McpToolbox } from '../mcp/toolbox';
import { segmentEndReason, transportLabels, type EndReason, type Transport } from '../core/vocabulary';
import type { StopOutcome } from '../workflow/workflow-stream';
import { STOPS, type StopReason } from './stop-reasons';
import type { Action, ClientEvent, StartWorkflowRequest } from '../workflow/contract';
import type { BillingStream } from '../workflow/billing-stream';
import { WorkflowStream, type CallHandle, type StreamEnd } from '../workflow/workflow-stream';
import type { AcceptanceListener } from './acceptance';
import { errorAnswer } from './action-answers';
import { decideEnd, type Ending } from './end-decision';
import type { RegisteredRun, RunInfo, RunRegistry } from './registry';
import { RunActions } from './run-actions';
import { recordRunEnd } from './run-end';
import type { RunEvents, RunFollowSource } from './run-events';
import { withMcpTools } from './start-request';
import type { LimitedRun, RunLimitEntry, RunLimits } from './run-limits';
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
const CLIENT_GONE = STOPS.client_gone;
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
 * Where a run's actions for its caller go: a blocking run's checkpoints (the HTTP adapter
 * writes them as ndjson lines), a WebSocket session's every action the gateway does not
 * serve itself (binary frames). `write` says whether the caller can take more: 'full'
 * pauses the stream until `drained()`, 'gone' ends the run (client_gone).
 */
export interface ActionSink {
  write(action: Action): 'ok' | 'full' | 'gone';
  /** Resolves when a full sink can take more. */
  drained(): Promise<void>;
  /** How long the caller may take nothing before it counts as gone (default LONGRUN_CALLER_STALL_MS). */
  readonly stallMs?: number;
}

/** What every run of this process shares: one object, built once by the launcher. */
export interface RunDeps {
  owner: OwnerClient;
  metrics: RunMetrics;
  logger: Logger;
  registry: RunRegistry;
  stopAckTimeoutMs: number;
  /** A blocking caller that takes nothing for this long is treated as gone. */
  callerStallMs: number;
  /** Detached runs' run limits (one timer for the process). */
  runLimits: RunLimits;
  /** The words stops are sent with (docs/spec.md §4; infrastructure ones configurable). */
  stopReasons: StopReasons;
  /** Bounds segment-end callbacks (aborted when a drain's budget runs out). */
  callbackSignal: AbortSignal;
  /** Gives a run whose workflow is followed its reporter (docs/spec.md §14). */
  follow?: RunFollowSource;
  /** Where the run's spans are made (tracing.ts). */
  tracing: Tracing;
}

/** What serving actions needs of the owner's authorization (not the whole preauth answer). */
export interface RunAccess {
  /** The user's API token (Service.Headers["x-gitlab-oauth-token"]). */
  token: string;
  timeoutHTTPRequests: boolean;
  /** X-Forwarded-For for relayed requests: the caller's chain plus its address. */
  forwardedFor: string | undefined;
}

/** One run's own: what it was started with. */
export interface RunSpec {
  requestId: string;
  transport: Transport;
  /** The span the run's spans (relays, tool calls, the stop handshake, the callback) are children of. */
  span: TraceSpan;
  /** Whether `span` is the run's own (detached, WebSocket: ended at teardown) or its request's (blocking). */
  ownsSpan: boolean;
  call: CallHandle;
  /** What admission took (id, lock, slots) and what the run holds in Redis; given back at teardown. */
  coordination: RunCoordination;
  /** Self-hosted billing beside the main stream (opened by the launcher); the run closes it at teardown. */
  billing?: BillingStream;
  /** The run's MCP sessions and tools (opened by the launcher); the run closes them at teardown. */
  mcp: McpToolbox;
  access: RunAccess;
  /** Detached runs: stopped with WORKHORSE_RUN_LIMIT at the run limit (RunDeps.runLimits). */
  limited?: boolean;
  /** Blocking runs write each checkpoint to the caller; WebSocket sessions every action for the client. */
  sink?: ActionSink;
}

export class Run implements RegisteredRun, LimitedRun {
  readonly id: string;
  readonly workflowId: string;
  readonly transport: Transport;
  readonly done: Promise<RunResult>;
  private phase: Phase = STARTING;
  private actions = 0;
  /** The status of the last checkpoint the service sent: whether it said the turn was over. */
  private lastCheckpointStatus: string | undefined;
  private stopping: Promise<StopOutcome> | undefined;
  private stopStartedAt = 0;
  /** When a WebSocket session's connection was lost, while the run waits for its client. */
  private parkedAt: number | undefined;
  /** The replica holding the client's socket while a bridge serves this run (docs/spec.md §12). */
  private socketReplica: string | undefined;
  /** While parked: the span of the wait, and why longrun gives it up (when it does). */
  private parkSpan: TraceSpan | undefined;
  private parkEnd: string | undefined;
  /** The stop handshake's span, from the stop to the teardown. */
  private stopSpan: TraceSpan | undefined;
  /** The stop check of the last action that needed one, and its serving. */
  private checking: Promise<void> | undefined;
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
  /** Those who follow the workflow (docs/spec.md §14); undefined while nobody does. */
  private events: RunEvents | undefined;
  private readonly stream: WorkflowStream;
  private readonly coordination: RunCoordination;

  constructor(
    private readonly spec: RunSpec,
    private readonly deps: RunDeps,
  ) {
    this.coordination = spec.coordination;
    this.id = spec.coordination.snapshot.runId;
    this.workflowId = spec.coordination.workflowId;
    this.transport = spec.transport;
    this.stream = new WorkflowStream(spec.call, (action) => this.onAction(action));
    this.coordination.attach(this);
    if (spec.limited) this.runLimit = deps.runLimits.add(this);
    deps.registry.add(this);
    deps.metrics.runOpened(this.transport, deps.registry.count(this.transport));
    this.done = this.stream.ended.then((end) => this.teardown(end));
    this.events = deps.follow?.eventsFor(this);
  }

  /** The correlation id of the request or session that started the run (docs/spec.md §13). */
  get requestId(): string {
    return this.spec.requestId;
  }

  get startedAt(): number {
    return this.coordination.snapshot.startedAt;
  }

  /** The state /runs shows: the phase's, or `parked` while a WebSocket run waits for its client. */
  get state(): string {
    return this.parkedAt !== undefined && this.phase.state === 'running' ? 'parked' : this.phase.state;
  }

  /** FollowableRun: report to `events` from now on (a follow began), or to nobody (the last follower went). */
  reportTo(events: RunEvents | undefined): void {
    this.events = this.phase.state === 'ended' ? undefined : events;
  }

  /**
   * One child logger per run, made when first needed: request_id, correlation_id,
   * workflow_id, run_id, transport and (tracing on) the run's trace_id and span_id on every line.
   */
  private get log(): Logger {
    this.logger ??= this.deps.logger.child({
      ...correlation(this.spec.requestId),
      workflow_id: this.workflowId,
      run_id: this.id,
      transport: transportLabels[this.transport],
      ...this.spec.span.logFields,
    });
    return this.logger;
  }

  /** The run's span, for a connection that re-attaches to link to (docs/spec.md §13). */
  get traceLink(): TraceLink | undefined {
    return this.spec.span.link;
  }

  /** Moves to `to` when the run is in one of `from`; false (nothing changes) otherwise. */
  private transition(from: readonly RunState[], to: Phase): boolean {
    if (!from.includes(this.phase.state)) return false;
    this.phase = to;
    this.coordination.snapshot.noteState(to.state);
    return true;
  }

  /** What a stop or cancel starts: its reason, and whether the run had been accepted. */
  private ending(ending: NonNullable<Ending>): Phase {
    return { state: 'stopping', ending, accepted: this.phase.state === 'running' };
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
    await this.coordination.writeRecord((err) => this.log.warn({ err }, 'run record not written'));
    return true;
  }

  info(): RunInfo {
    const lastActionAt = this.coordination.snapshot.lastActionAt;
    return {
      workflow_id: this.workflowId,
      run_id: this.id,
      transport: transportLabels[this.transport],
      state: this.state,
      started_at: new Date(this.startedAt).toISOString(),
      last_action_at: lastActionAt === undefined ? null : new Date(lastActionAt).toISOString(),
      actions: this.actions,
      ...(this.parkedAt !== undefined ? { parked_at: new Date(this.parkedAt).toISOString() } : {}),
      ...(this.socketReplica !== undefined ? { socket_replica: this.socketReplica } : {}),
    };
  }

  /**
   * The one entry for every stop. The first stop decides how the run ends (later ones
   * wait for the same end); resolves when teardown is complete.
   *
   * - run_limit, drain, lock_lost, stop_requested, and a WebSocket client's close frame,
   *   pong timeout or failed ping: the stop handshake, with the word StopReasons gives
   *   for it as StopWorkflowRequest.reason;
   * - client_gone (the caller hung up or stalled, or the process is closing) and
   *   workflow_unavailable (the service never took the stream): the call is cancelled
   *   at once, no handshake. A stop already under way keeps its reason; its call is
   *   cancelled all the same.
   */
  stop(reason: StopReason): Promise<RunResult> {
    const live = this.phase.state === 'starting' || this.phase.state === 'running';
    switch (reason.kind) {
      case 'client_gone':
      case 'workflow_unavailable':
        this.transition(['starting', 'running'], this.ending({ by: 'cancel', reason: reason.kind }));
        this.stream.cancel();
        return this.done;
      case 'stop_requested':
        // The run acting on the owner's stop key deletes it; the stop wins over acceptance.
        if (!live) return this.done;
        this.stopSeen = true;
        this.acceptance?.stopped();
        this.coordination.stopKeyActedOn();
        return this.handshake(this.deps.stopReasons.user(reason.value), this.deps.stopAckTimeoutMs);
      case 'lock_lost':
        this.log.warn({ why: reason.why }, 'lease lost: stopping the run');
        return this.handshake(this.deps.stopReasons.infra('lock_lost'), this.lockLostAckTimeoutMs());
      case 'run_limit':
        this.runLimit = undefined;
        return this.handshake(this.deps.stopReasons.infra('run_limit'), this.deps.stopAckTimeoutMs);
      case 'drain':
        return this.handshake(this.deps.stopReasons.infra('drain'), reason.ackTimeoutMs ?? this.deps.stopAckTimeoutMs);
      case 'client_closed':
        return this.handshake(this.deps.stopReasons.websocket(reason.kind, reason.code), this.deps.stopAckTimeoutMs);
      case 'pong_timeout':
      case 'ping_failed':
        return this.handshake(this.deps.stopReasons.websocket(reason.kind), this.deps.stopAckTimeoutMs);
    }
  }

  /** The stop handshake (workflow-stream.ts), sending `cause.reason`, for a run still starting or running. */
  private handshake(cause: StopCause, ackTimeoutMs: number): Promise<RunResult> {
    if (this.transition(['starting', 'running'], this.ending({ by: 'stop', reason: cause.end, ack: cause.ack }))) {
      this.stopStartedAt = performance.now();
      this.stopSpan = this.deps.tracing.stopHandshake(this.spec.span, cause.reason, cause.end);
      this.stopping = this.stream.stop(cause.reason, cause.ack, ackTimeoutMs);
    }
    return this.done;
  }

  /**
   * A lost lease may be taken by another run once it expires: the handshake must end
   * before that, so it gets what is left of the lease, not the full ack timeout.
   */
  private lockLostAckTimeoutMs(): number {
    const left = this.coordination.leaseRemainingMs - 50;
    return Math.max(1, Math.min(this.deps.stopAckTimeoutMs, left));
  }

  private onAction(action: Action): void {
    this.actions += 1;
    this.coordination.snapshot.noteAction(Date.now());
    if (this.actions === 1) this.acceptance?.firstAction();
    // In the order the service sent them, whatever serving each takes.
    this.events?.action(action);
    if (action.action === 'newCheckpoint') {
      this.lastCheckpointStatus = action.newCheckpoint?.status;
      // A WebSocket client gets checkpoints in order with every other action: the same path.
      if (this.transport === 'websocket') {
        this.serve(action);
        return;
      }
      this.deps.metrics.action('newCheckpoint');
      if (this.spec.sink) this.deliver(this.spec.sink, action);
      return;
    }
    this.serve(action);
  }

  /**
   * Hands a checkpoint to the blocking caller. A full sink pauses reading from the
   * service (HTTP/2 flow control then slows it) until the caller has taken the lines;
   * a caller that takes nothing for callerStallMs, or is gone, ends the run.
   */
  private deliver(sink: ActionSink, action: Action): void {
    const taken = sink.write(action);
    if (taken === 'gone') {
      void this.stop(CLIENT_GONE);
      return;
    }
    if (taken === 'ok' || this.stallTimer) return;
    this.stream.pause();
    const stallMs = sink.stallMs ?? this.deps.callerStallMs;
    this.stallTimer = setTimeout(() => {
      this.log.warn({ stall_ms: stallMs }, `${this.transport === 'websocket' ? 'websocket client' : 'blocking caller'} took nothing: ending the run`);
      void this.stop(CLIENT_GONE);
    }, stallMs);
    void sink.drained().then(() => {
      clearTimeout(this.stallTimer);
      this.stallTimer = undefined;
      if (this.phase.state !== 'ended') this.stream.resume();
    });
  }

  /** Checks the stop key (a locked run), then serves the action; the answer is written exactly once. */
  private serve(action: Action): void {
    if (!this.coordination.locked) {
      this.serveChecked(action);
      return;
    }
    // Checks resolve in the order they were asked (stop-reads.ts): actions are served in order.
    this.checking = this.coordination.checkStop().then(() => this.serveChecked(action));
  }

  /**
   * Serves an action whose stop check is done: refused once the run is stopping. A
   * WebSocket session's client gets every action the gateway does not serve itself.
   */
  private serveChecked(action: Action): void {
    const kind = action.action ?? 'unknown';
    if (kind === 'newCheckpoint') {
      // A checkpoint takes no answer: the caller gets it whatever the run is doing.
      this.deps.metrics.action(kind);
      if (this.spec.sink) this.deliver(this.spec.sink, action);
      return;
    }
    if (this.phase.state !== 'starting' && this.phase.state !== 'running') {
      this.deps.metrics.action(kind);
      this.stream.respond(errorAnswer(action, 'request aborted: the run is stopping'));
      return;
    }
    if (this.transport === 'websocket' && this.spec.sink && !this.servedHere(action)) {
      this.deps.metrics.action(kind);
      this.deliver(this.spec.sink, action);
      return;
    }
    this.served ??= new RunActions(
      {
        owner: this.deps.owner,
        metrics: this.deps.metrics,
        workflowId: this.workflowId,
        requestId: this.spec.requestId,
        token: this.spec.access.token,
        timeoutHTTPRequests: this.spec.access.timeoutHTTPRequests,
        mcp: this.spec.mcp,
        billing: this.spec.billing,
        forwardedFor: this.spec.access.forwardedFor,
        span: this.spec.span,
      },
      this.stream,
      this.coordination.snapshot,
      () => this.log,
    );
    void this.served.serve(action);
  }

  /**
   * What the gateway answers itself on a WebSocket session (docs/spec.md §11): the API
   * relay, and the tools of the owner's MCP servers (any other tool is the client's own).
   */
  private servedHere(action: Action): boolean {
    if (action.action === 'runHTTPRequest' || action.action === 'trackLlmCallForSelfHosted') return true;
    return action.action === 'runMCPTool' && this.spec.mcp.has(action.runMCPTool?.name ?? '');
  }

  /**
   * A WebSocket session's connection was lost at `at` and the run waits for its client
   * (docs/spec.md §12), or one re-attached (undefined; `by`: its span): /runs and the run
   * record say `parked`, and the wait is a span of its own.
   */
  noteParked(at: number | undefined, windowMs: number, socketReplica?: string, by?: TraceLink): void {
    if (at !== undefined) {
      this.parkSpan ??= this.deps.tracing.parked(this.spec.span);
    } else if (this.parkSpan) {
      this.deps.tracing.parkEnded(this.parkSpan, this.spec.span, 'reattached', by, socketReplica);
      this.parkSpan = undefined;
      this.parkEnd = undefined;
    }
    this.parkedAt = at;
    this.socketReplica = at === undefined ? socketReplica : undefined;
    if (at === undefined) this.events?.attached(socketReplica);
    else this.events?.parked(at);
    this.coordination.snapshot.noteState(at === undefined ? this.phase.state : 'parked');
    this.coordination.noteParked(at !== undefined, windowMs, (err) => this.log.warn({ err }, 'run record not written'));
  }

  /** longrun gives the parked run up (`expired`, `backlog_full`, `taken_over`): its park span ends with that at teardown. */
  noteParkEnd(why: string): void {
    this.parkEnd ??= why;
  }

  /**
   * A WebSocket client's event for the service (docs/spec.md §11): its answer to an action,
   * a heartbeat or its own stopWorkflow, passed on as it is. False once the call cannot take it.
   */
  fromClient(event: ClientEvent): boolean {
    // Every start carries the owner's MCP tools, a client's later one as its first (Workhorse re-appends them).
    if ('startRequest' in event) return this.stream.send({ startRequest: withMcpTools(event.startRequest, this.spec.mcp) });
    return this.stream.send(event);
  }

  /** Runs once, when the call has ended: gives everything back, then records the end. */
  private async teardown(end: StreamEnd): Promise<RunResult> {
    // Actions that arrived before the end and wait for their stop check are served (or
    // refused) first: a WebSocket client gets the last checkpoint before its close.
    await this.checking;
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
    const inFlight = this.coordination.snapshot.inFlight();
    if (this.runLimit) this.deps.runLimits.remove(this.runLimit);
    clearTimeout(this.stallTimer);
    this.served?.end();
    this.spec.billing?.close();
    // Sessions end (DELETE) while the rest is given back; bounded, never rejects.
    const mcpClosed = this.spec.mcp.close();
    // A stop that did not decide the end (the service had ended by itself) counts no outcome.
    const handshake = this.stopping ? await this.stopping : undefined;
    const stopOutcome = decision.byStop ? handshake : undefined;
    if (stopOutcome) this.deps.metrics.stopAck(stopOutcome, (performance.now() - this.stopStartedAt) / 1000);
    if (this.stopSpan) this.deps.tracing.stopHandshakeEnded(this.stopSpan, stopOutcome ?? 'crossed', end.code);
    if (this.parkSpan) this.deps.tracing.parkEnded(this.parkSpan, this.spec.span, this.parkEnd ?? ended.reason);
    // Recorded before the lock is given back: the workflow's next run is reported after this end.
    const events = this.events;
    this.events = undefined;
    if (events) await events.ended({ reason: segmentEndReason(decision.reason), inFlight, endedWhileStopping: decision.endedWhileStopping });
    await Promise.all([this.coordination.release(), mcpClosed]);
    this.deps.registry.remove(this);
    const result: RunResult = {
      reason: ended.reason,
      endedWhileStopping: decision.endedWhileStopping,
      end,
      stopOutcome,
      durationMs: Date.now() - this.startedAt,
      actions: this.actions,
    };
    await recordRunEnd(this.deps, () => this.log, {
      workflowId: this.workflowId,
      runId: this.id,
      requestId: this.spec.requestId,
      transport: this.transport,
      // Only accepted runs are called back: an end before the 202 was answered to the dispatcher itself.
      callback: this.transport === 'detached' && ended.accepted,
      inFlight,
      span: this.spec.span,
      ...result,
    });
    // After the callback: the run's span holds it.
    if (this.spec.ownsSpan)
      this.deps.tracing.runEnded(this.spec.span, {
        reason: result.reason,
        grpcCode: end.code,
        stopOutcome,
        actions: result.actions,
        endedWhileStopping: result.endedWhileStopping,
      });
    return result;
  }
}
