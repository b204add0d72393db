/**
 * Starts runs. An entry point (the HTTP execute route, or any other transport) hands the
 * launcher an authorized start — the owner's preauth answer and the decoded
 * StartWorkflowRequest — and gets a typed outcome back, or a GatewayError. The launcher
 * owns the order docs/spec.md §3 fixes:
 *
 *   process slot → lock and actor slot → MCP discovery → drain check → open the gRPC
 *     stream → startRequest (with the discovered MCP tools) written to an open HTTP/2
 *     stream (within the stream-open timeout)
 *     → blocking: streaming (checkpoints to the caller's sink)
 *     → detached: acceptance (first action, or the accept wait counted from the write)
 *       → accepted | finished | error
 *
 * The caller's lifetime is an AbortSignal, checked after every await: a caller gone
 * before the run exists starts nothing; a blocking run is bound to it once open (a
 * detached run is not: it runs on without its caller). What admission took is one
 * RunCoordination, and the MCP sessions one McpToolbox: both are given back here while no
 * run exists, then by the run at its teardown. Nothing here knows HTTP: refusals are
 * GatewayErrors with a code, which each transport's adapter answers in its own terms.
 */
import { forwardedForOf, type Caller } from '../core/caller';
import type { CoordinationDeps, RunCoordination } from '../coordination/run-coordination';
import { GatewayError } from '../core/errors';
import type { McpConnector } from '../mcp/connector';
import type { McpToolbox } from '../mcp/toolbox';
import { TraceSpan, type TraceLink, type Tracing } from '../observability/tracing';
import type { DuoWorkflowAuth } from '../owner/preauth';
import { STOPS, type StopReason } from './stop-reasons';
import type { AcceptedOn } from './words';
import type { ChannelPool } from '../workflow/channel-pool';
import type { ClientEvent, StartWorkflowRequest } from '../workflow/contract';
import { BillingStream } from '../workflow/billing-stream';
import { streamEndToError } from '../workflow/grpc-errors';
import { awaitAcceptance } from './acceptance';
import { reserve, type AdmissionDeps } from './admission';
import { Run, type ActionSink, type RunDeps, type RunResult } from './run';
import type { RunSettings } from './settings';
import { authorizeStartRequest, callMetadata, withMcpTools } from './start-request';

/** What an entry point brings to start a run, whatever the transport. */
export interface AuthorizedStart {
  /** The owner's answer (`DuoWorkflow` of the preauth): service, MCP servers, lock, actor. */
  auth: DuoWorkflowAuth;
  /** The caller's StartWorkflowRequest, decoded; the owner's authorization is applied here. */
  request: StartWorkflowRequest;
  requestId: string;
  /** Who asked: address and X-Forwarded-For (relays), User-Agent and client headers (gRPC). */
  caller?: Caller;
  /** Aborted when the caller is gone. */
  signal?: AbortSignal;
  /** The request's or session's span: the start's spans are its children, a detached or WebSocket run's span is linked to it. */
  span?: TraceSpan;
}

/** An authorized detached start (the owner answered `Detached: true`). */
export type DetachedStart = AuthorizedStart & { transport: 'detached' };
/** An authorized blocking start: checkpoints stream to `sink`. */
export type BlockingStart = AuthorizedStart & { transport: 'blocking'; sink: ActionSink };
/** An authorized WebSocket session's start: every action for the client goes to `sink`. */
export type WebSocketStart = AuthorizedStart & { transport: 'websocket'; sink: ActionSink };
export type LaunchRequest = DetachedStart | BlockingStart | WebSocketStart;

export type DetachedOutcome =
  /** The run was accepted and goes on without its caller. */
  | { kind: 'accepted'; runId: string; acceptedOn: AcceptedOn }
  /** The stream ended cleanly before acceptance. */
  | { kind: 'finished'; runId: string };

/** Blocking: checkpoints go to the sink until `done` (the caller's signal ends it early). */
export interface Streaming {
  kind: 'streaming';
  runId: string;
  done: Promise<RunResult>;
}

/** What a WebSocket session holds of its run: the client's events in, its stops, its end. */
export interface SessionRun {
  readonly id: string;
  /** The correlation id of the request that started it. */
  readonly requestId: string;
  readonly done: Promise<RunResult>;
  fromClient(event: ClientEvent): boolean;
  stop(reason: StopReason): Promise<RunResult>;
  /**
   * The session's connection was lost at `at` (parked for `windowMs`), or one re-attached
   * (undefined): on this replica, or through a bridge from `socketReplica`; `by` is the
   * span of the connection that re-attached (docs/spec.md §13: the two are linked).
   */
  noteParked(at: number | undefined, windowMs: number, socketReplica?: string, by?: TraceLink): void;
  /** Why longrun is giving the parked run up (its park span says so). */
  noteParkEnd(why: string): void;
  /** The run's span, for a connection that re-attaches to link to. */
  readonly traceLink: TraceLink | undefined;
}

/** WebSocket: the run is open; the session passes events both ways until `run.done`. */
export interface Session {
  kind: 'session';
  run: SessionRun;
}

export type LaunchOutcome = DetachedOutcome | Streaming | Session;

/** The process's parts the launcher, admission and every run share (their settings are RunSettings): built once per process. */
export interface LauncherDeps extends Omit<RunDeps, 'stopAckTimeoutMs' | 'callerStallMs'> {
  /** What admission makes each run's coordination with (lock, lease, stop watch). */
  coordination: CoordinationDeps;
  replicaId: string;
  channels: ChannelPool;
  /** Opens each run's MCP sessions and discovers their tools, within mcpDiscoveryTimeoutMs (McpSettings.discoveryTimeoutMs). */
  mcp: McpConnector;
  mcpDiscoveryTimeoutMs: number;
  isDraining(): boolean;
  tracing: Tracing;
}

function clientGone(runId?: string): GatewayError {
  return new GatewayError('CLIENT_GONE', 'the caller hung up before the run started', { runId });
}

function drainingError(runId?: string): GatewayError {
  return new GatewayError('DRAINING', 'this instance is shutting down; retry on another', { runId });
}

export class Launcher {
  private readonly admission: AdmissionDeps;
  private readonly runDeps: RunDeps;

  constructor(
    private readonly settings: RunSettings,
    private readonly deps: LauncherDeps,
  ) {
    const { coordination, registry, metrics, logger, replicaId } = deps;
    this.admission = { coordination, registry, metrics, logger, replicaId, maxRunsPerActor: settings.maxRunsPerActor };
    this.runDeps = { ...deps, stopAckTimeoutMs: settings.stopAckTimeoutMs, callerStallMs: settings.callerStallMs };
  }

  /** Throws DRAINING once the process drains (checked before preauth and again after admission). */
  checkServing(): void {
    if (this.deps.isDraining()) throw drainingError();
  }

  /**
   * Starts a run in the order of docs/spec.md §3. Throws a GatewayError for every refusal and for
   * a stream that fails before it was accepted (detached) or before the caller saw
   * anything (blocking, from `done`: see the HTTP adapter); nothing taken stays taken.
   */
  launch(start: DetachedStart): Promise<DetachedOutcome>;
  launch(start: BlockingStart): Promise<Streaming>;
  launch(start: WebSocketStart): Promise<Session>;
  async launch(start: LaunchRequest): Promise<LaunchOutcome> {
    const { auth, requestId, signal, caller } = start;
    const { tracing } = this.deps;
    const span = start.span ?? TraceSpan.NONE;
    const authorized = authorizeStartRequest(start.request, auth, start.transport);
    if (signal?.aborted) throw clientGone();
    const coordination = await this.admit(start, span);
    const discoveryStarted = performance.now();
    let mcp: McpToolbox | undefined;
    let streamSpan: TraceSpan | undefined;
    let run: Run;
    try {
      if (signal?.aborted) throw clientGone();
      mcp = await this.deps.mcp.open(
        {
          servers: auth.McpServers,
          token: auth.Service.Headers?.['x-gitlab-oauth-token'] ?? '',
          workflowId: auth.WorkflowID,
          requestId,
          forwardedFor: forwardedForOf(caller),
          span,
        },
        this.discoveryTimeoutMs(start.transport),
      );
      if (signal?.aborted) throw clientGone();
      this.checkServing();
      streamSpan = tracing.streamOpen(span);
      run = this.open(start, coordination, mcp, streamSpan);
    } catch (err) {
      if (streamSpan) tracing.streamOpened(streamSpan, 'unreachable');
      await Promise.all([coordination.release(), mcp?.close()]);
      throw err;
    }
    const request = withMcpTools(authorized, mcp);
    if (start.transport === 'blocking') bindToCaller(run, signal);
    if (start.transport !== 'detached') void run.markRunning();
    await this.send(run, request, start.transport === 'detached' ? undefined : signal, streamSpan);
    if (start.transport === 'blocking') return { kind: 'streaming', runId: run.id, done: run.done };
    if (start.transport === 'websocket') return { kind: 'session', run };
    // The caller waited through discovery already: it counts against the accept wait.
    return this.accept(run, Math.max(0, this.settings.acceptWaitMs - (performance.now() - discoveryStarted)));
  }

  /**
   * Admission (admission.ts), as the `lock acquire` span: the process slot, the actor's
   * slot and the workflow's lock — for a start that takes the lock (detached, or the
   * owner's LockConcurrentFlow).
   */
  private async admit(start: LaunchRequest, span: TraceSpan): Promise<RunCoordination> {
    const { auth, requestId, transport } = start;
    const lockConcurrentFlow = auth.LockConcurrentFlow ?? false;
    const lockSpan = transport === 'detached' || lockConcurrentFlow ? this.deps.tracing.lock(span) : TraceSpan.NONE;
    let coordination: RunCoordination;
    try {
      coordination = await reserve({ workflowId: auth.WorkflowID, transport, lockConcurrentFlow, actorId: auth.ActorID ?? undefined, requestId }, this.admission);
    } catch (err) {
      this.deps.tracing.lockEnded(lockSpan, err instanceof GatewayError ? err.code : 'INTERNAL');
      throw err;
    }
    this.deps.tracing.lockEnded(lockSpan, coordination.locked ? 'ok' : 'unlocked');
    return coordination;
  }

  /**
   * How long discovering MCP tools may hold a start: the discovery deadline, and for a
   * detached start never past the accept wait, so the 202 is not later than it would be
   * without MCP servers.
   */
  private discoveryTimeoutMs(transport: LaunchRequest['transport']): number {
    const { mcpDiscoveryTimeoutMs } = this.deps;
    const { acceptWaitMs } = this.settings;
    return transport === 'detached' ? Math.min(mcpDiscoveryTimeoutMs, acceptWaitMs) : mcpDiscoveryTimeoutMs;
  }

  /**
   * Sends the startRequest and waits until it is on an open HTTP/2 stream. A service that
   * has not taken it within the stream-open timeout (it accepts TCP and never speaks
   * HTTP/2, or is unreachable behind a silent network) is given up: the run is cancelled
   * and torn down, and the caller gets 502 — no run is accepted on a stream that never
   * opened. A stream that ends first is answered from its end by the caller of this.
   * `span` (the stream open's) ends here, with how the write went.
   */
  private async send(run: Run, request: StartWorkflowRequest, signal: AbortSignal | undefined, span: TraceSpan): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), this.settings.streamOpenTimeoutMs)));
    const sent = await Promise.race([run.start(request), timedOut]);
    clearTimeout(timer);
    this.deps.tracing.streamOpened(span, sent);
    if (sent === 'timeout') {
      void run.stop(WORKFLOW_UNAVAILABLE);
      await run.done;
      throw new GatewayError('WORKFLOW_SERVICE_UNAVAILABLE', 'workflow service did not open the stream in time', { runId: run.id });
    }
    if (signal?.aborted) {
      // The caller left while the stream opened (a blocking caller's run is stopped by its binding already).
      void run.stop(CLIENT_GONE);
      await run.done;
      throw clientGone(run.id);
    }
  }

  /**
   * Opens the gRPC stream (its metadata carries `streamSpan`'s traceparent) and the Run that
   * owns it (and, from here on, its coordination). A detached or WebSocket run gets a span
   * of its own, linked to the request's; a blocking run's spans go under the request's.
   */
  private open(start: LaunchRequest, coordination: RunCoordination, mcp: McpToolbox, streamSpan: TraceSpan): Run {
    const { auth, requestId, transport, caller } = start;
    const trace = streamSpan.headers;
    let call;
    let billing: BillingStream | undefined;
    try {
      call = this.deps.channels.open(auth.Service.URI, auth.Service.Secure ?? false, callMetadata(auth, requestId, caller, trace), caller?.userAgent);
      // Self-hosted billing beside the main stream, with the cloud service's own headers (Workhorse's stream_manager).
      const cloud = auth.CloudServiceForSelfHosted;
      if (cloud?.URI) {
        const metadata = callMetadata({ ...auth, Service: { URI: cloud.URI, Headers: cloud.Headers ?? {}, Secure: cloud.Secure ?? false } }, requestId, caller, trace);
        billing = new BillingStream(this.deps.channels.openBilling(cloud.URI, cloud.Secure ?? false, metadata, caller?.userAgent));
      }
    } catch (err) {
      if (call) call.cancel();
      throw new GatewayError('WORKFLOW_SERVICE_UNAVAILABLE', 'workflow service could not be reached', { cause: err });
    }
    const requestSpan = start.span ?? TraceSpan.NONE;
    const ownSpan = transport !== 'blocking';
    const span = ownSpan ? this.deps.tracing.run(requestSpan, { workflowId: auth.WorkflowID, runId: coordination.snapshot.runId, transport }) : requestSpan;
    return new Run(
      {
        requestId,
        transport,
        span,
        ownsSpan: ownSpan,
        call,
        coordination,
        mcp,
        ...(billing ? { billing } : {}),
        access: {
          token: auth.Service.Headers?.['x-gitlab-oauth-token'] ?? '',
          timeoutHTTPRequests: auth.TimeoutHTTPRequests ?? false,
          forwardedFor: forwardedForOf(caller),
        },
        ...(start.transport === 'detached' ? { limited: true } : { sink: start.sink }),
      },
      this.runDeps,
    );
  }

  /**
   * Detached acceptance (docs/spec.md §3b): the first action or the accept wait makes the run
   * accepted (its record is written before the 202); a stream that ends or is stopped
   * first is answered from its end, after its teardown has given everything back.
   */
  private async accept(run: Run, acceptWaitMs: number): Promise<DetachedOutcome> {
    const sentAt = performance.now();
    const acceptance = await awaitAcceptance(run, acceptWaitMs);
    if (acceptance.kind === 'accepted' && (await run.markRunning())) {
      this.deps.metrics.accepted(acceptance.on, (performance.now() - sentAt) / 1000);
      return { kind: 'accepted', runId: run.id, acceptedOn: acceptance.on };
    }
    const result = await run.done;
    if (acceptance.kind === 'stopped' || result.reason === 'stop_requested') {
      throw new GatewayError('STOPPED', 'the owner stopped this workflow before the run was accepted', { runId: run.id });
    }
    // Drained before acceptance: the turn was handed back; the caller retries elsewhere.
    if (result.reason === 'drain') throw drainingError(run.id);
    if (result.end.code !== 0) throw streamEndToError(result.end, run.id);
    return { kind: 'finished', runId: run.id };
  }
}

const { workflow_unavailable: WORKFLOW_UNAVAILABLE, client_gone: CLIENT_GONE } = STOPS;

/** A blocking run ends when its caller does: the signal stops it (client_gone) until the run is over. */
function bindToCaller(run: Run, signal: AbortSignal | undefined): void {
  if (!signal) return;
  if (signal.aborted) {
    void run.stop(CLIENT_GONE);
    return;
  }
  const onAbort = (): void => void run.stop(CLIENT_GONE);
  signal.addEventListener('abort', onAbort, { once: true });
  void run.done.then(() => signal.removeEventListener('abort', onAbort));
}
