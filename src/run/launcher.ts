/**
 * Starts runs. An entry point (the HTTP execute route, or any other transport) hands the
 * launcher an authorized start — the owner's preauth answer and the decoded
 * StartWorkflowRequest — and gets a typed outcome back, or a GatewayError. The launcher
 * owns the order SPEC §3 fixes:
 *
 *   process slot → lock and actor slot → MCP discovery → drain check → open the gRPC stream
 *     → startRequest (with the discovered MCP tools)
 *     → blocking: streaming (checkpoints to the caller's sink)
 *     → detached: acceptance (first action or the accept wait) → accepted | finished | error
 *
 * What admission took is one Reservation, and the MCP sessions one McpToolbox: both are
 * given back here while no run exists, then by the run at its teardown. Nothing here
 * knows HTTP.
 */
import type { Config } from '../config';
import { GatewayError } from '../errors';
import type { McpConnector } from '../owner/mcp/connector';
import type { McpToolbox } from '../owner/mcp/toolbox';
import type { DuoWorkflowAuth } from '../owner/preauth';
import type { AcceptedOn } from '../vocabulary';
import type { ChannelPool } from '../workflow/channel-pool';
import type { StartWorkflowRequest } from '../workflow/contract';
import { streamEndToError } from '../workflow/grpc-errors';
import { awaitAcceptance } from './acceptance';
import { reserve, type AdmissionDeps } from './admission';
import type { Reservation } from './reservation';
import { Run, type CheckpointSink, type RunContext, type RunResult } from './run';
import { authorizeStartRequest, callMetadata, withMcpTools } from './start-request';

/** What an entry point brings to start a run, whatever the transport. */
export interface AuthorizedStart {
  /** The owner's answer (`DuoWorkflow` of the preauth): service, MCP servers, lock, actor. */
  auth: DuoWorkflowAuth;
  /** The caller's StartWorkflowRequest, decoded; the owner's authorization is applied here. */
  request: StartWorkflowRequest;
  requestId: string;
  /** The caller's X-Forwarded-For chain plus its address (sent to MCP servers), when known. */
  forwardedFor?: string | undefined;
}

/** An authorized detached start (the owner answered `Detached: true`). */
export type DetachedStart = AuthorizedStart & { transport: 'detached' };
/** An authorized blocking start: checkpoints stream to `sink`. */
export type BlockingStart = AuthorizedStart & { transport: 'http'; sink: CheckpointSink };
export type LaunchRequest = DetachedStart | BlockingStart;

export type DetachedOutcome =
  /** The run was accepted and goes on without its caller. */
  | { kind: 'accepted'; runId: string; acceptedOn: AcceptedOn }
  /** The stream ended cleanly before acceptance. */
  | { kind: 'finished'; runId: string };

/** Blocking: checkpoints go to the sink until `done`; `cancel()` when the caller is gone. */
export interface Streaming {
  kind: 'streaming';
  runId: string;
  done: Promise<RunResult>;
  cancel(): void;
}

export type LaunchOutcome = DetachedOutcome | Streaming;

export interface LauncherParts extends RunContext {
  config: Config;
  channels: ChannelPool;
  /** Opens each run's MCP sessions and discovers their tools. */
  mcp: McpConnector;
  isDraining(): boolean;
}

export function drainingError(runId?: string): GatewayError {
  return new GatewayError('DRAINING', 'this instance is shutting down; retry on another', { retryAfterS: 1, runId });
}

export class Launcher {
  private readonly admission: AdmissionDeps;

  constructor(private readonly parts: LauncherParts) {
    this.admission = { ...parts, leaseTtlMs: parts.config.leaseTtlMs, maxRunsPerActor: parts.config.maxRunsPerActor };
  }

  /** Throws DRAINING once the process drains (checked before preauth and again after admission). */
  checkServing(): void {
    if (this.parts.isDraining()) throw drainingError();
  }

  /**
   * Starts a run in the order of SPEC §3. Throws a GatewayError for every refusal and for
   * a stream that fails before it was accepted (detached) or before the caller saw
   * anything (blocking, from `done`: see the HTTP adapter); nothing taken stays taken.
   */
  launch(start: DetachedStart): Promise<DetachedOutcome>;
  launch(start: BlockingStart): Promise<Streaming>;
  async launch(start: LaunchRequest): Promise<LaunchOutcome> {
    const { auth, requestId } = start;
    const authorized = authorizeStartRequest(start.request, auth);
    const reservation = await reserve(
      { workflowId: auth.WorkflowID, transport: start.transport, lockConcurrentFlow: auth.LockConcurrentFlow ?? false, actorId: auth.ActorID ?? undefined, requestId },
      this.admission,
    );
    const discoveryStarted = performance.now();
    let mcp: McpToolbox | undefined;
    let run: Run;
    try {
      mcp = await this.parts.mcp.open(
        { servers: auth.McpServers, token: auth.Service.Headers?.['x-gitlab-oauth-token'] ?? '', workflowId: auth.WorkflowID, requestId, forwardedFor: start.forwardedFor },
        this.discoveryTimeoutMs(start.transport),
      );
      this.checkServing();
      run = this.open(start, reservation, mcp);
    } catch (err) {
      await Promise.all([reservation.release(), mcp?.close()]);
      throw err;
    }
    const request = withMcpTools(authorized, mcp);
    if (start.transport === 'http') {
      void run.markRunning();
      run.start(request);
      return { kind: 'streaming', runId: run.id, done: run.done, cancel: () => run.cancel() };
    }
    // The caller waited through discovery already: it counts against the accept wait.
    const acceptWaitMs = Math.max(0, this.parts.config.acceptWaitMs - (performance.now() - discoveryStarted));
    return this.accept(run, request, acceptWaitMs);
  }

  /**
   * How long discovering MCP tools may hold a start: the discovery deadline, and for a
   * detached start never past the accept wait, so the 202 is not later than it would be
   * without MCP servers.
   */
  private discoveryTimeoutMs(transport: LaunchRequest['transport']): number {
    const { mcpDiscoveryTimeoutMs, acceptWaitMs } = this.parts.config;
    return transport === 'detached' ? Math.min(mcpDiscoveryTimeoutMs, acceptWaitMs) : mcpDiscoveryTimeoutMs;
  }

  /** Opens the gRPC stream and the Run that owns it (and, from here on, the reservation). */
  private open(start: LaunchRequest, reservation: Reservation, mcp: McpToolbox): Run {
    const { auth, requestId, transport } = start;
    let call;
    try {
      call = this.parts.channels.open(auth.Service.URI, auth.Service.Secure ?? false, callMetadata(auth, requestId));
    } catch (err) {
      throw new GatewayError('WORKFLOW_SERVICE_UNAVAILABLE', 'workflow service could not be reached', { cause: err });
    }
    return new Run(
      {
        workflowId: auth.WorkflowID,
        requestId,
        transport,
        call,
        reservation,
        mcp,
        access: {
          token: auth.Service.Headers?.['x-gitlab-oauth-token'] ?? '',
          timeoutHTTPRequests: auth.TimeoutHTTPRequests ?? false,
        },
        ...(start.transport === 'http' ? { sink: start.sink } : { runLimitMs: this.parts.config.runLimitMs }),
      },
      this.parts,
    );
  }

  /**
   * Detached acceptance (SPEC §3b): the first action or the accept wait makes the run
   * accepted (its record is written before the 202); a stream that ends or is stopped
   * first is answered from its end, after its teardown has given everything back.
   */
  private async accept(run: Run, request: StartWorkflowRequest, acceptWaitMs: number): Promise<DetachedOutcome> {
    const sentAt = performance.now();
    run.start(request);
    const acceptance = await awaitAcceptance(run, acceptWaitMs);
    if (acceptance.kind === 'accepted' && (await run.markRunning())) {
      this.parts.metrics.acceptDuration.observe({ accepted_on: acceptance.on }, (performance.now() - sentAt) / 1000);
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
