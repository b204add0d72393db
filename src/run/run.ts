/**
 * A Run is one turn in flight: the workflow stream, its lease, its timers and its
 * teardown. Every way a run can end goes through here:
 *
 *   stream ends by itself        → finished / workflow_unavailable / stream_error
 *   stop(reason) (limit, drain,  → stop handshake (workflow-stream.ts), then teardown
 *     lock lost, owner's stop)
 *   cancel() (caller hung up)    → client_gone
 *
 * Teardown always: clears timers, aborts in-flight relays, releases the lock, leaves the
 * registry, frees the detached slot, records metrics and one log line, and (detached)
 * sends the segment-end callback.
 */
import { randomUUID } from 'node:crypto';
import { forwardedForOf, type Caller } from '../caller';
import type { Logger } from '../log';
import type { Metrics, TeardownReason, Transport } from '../metrics';
import type { OwnerClient } from '../owner/owner-client';
import type { DuoWorkflowAuth } from '../owner/preauth';
import type { CoordinationBackend } from '../coordination/backend';
import { Lease } from '../coordination/lease';
import type { StopWatcher } from '../coordination/stop-watcher';
import type { Action, StartWorkflowRequest } from '../workflow/contract';
import type { WorkflowCall } from '../workflow/channel-pool';
import { McpSessions } from '../owner/mcp-client';
import { serveAction } from './action-server';
import type { RegisteredRun, RunInfo, RunRegistry, Slot } from './registry';
import { LOCK_LOST, RUN_LIMIT, teardownForEnd, teardownForStop, userStopReason } from './stop-reasons';
import { WorkflowStream, type StopOutcome, type StreamEnd } from './workflow-stream';

export type RunState = 'starting' | 'running' | 'stopping' | 'ended';

/** The abort reason of a run's in-flight work; one shared instance (no stack trace per run). */
const RUN_ENDED = Object.freeze(new Error('run ended'));

export interface RunResult {
  reason: TeardownReason;
  end: StreamEnd;
  stopOutcome: StopOutcome | undefined;
  durationMs: number;
  actions: number;
}

export interface RunDeps {
  owner: OwnerClient;
  metrics: Metrics;
  logger: Logger;
  registry: RunRegistry;
  backend: CoordinationBackend;
  stopWatcher: StopWatcher;
  replicaId: string;
  stopAckTimeoutMs: number;
  leaseTtlMs: number;
  /** Deadline of one MCP request. */
  mcpTimeoutMs: number;
  /** Bounds segment-end callbacks (aborted when a drain's budget runs out). */
  callbackSignal: AbortSignal;
}

export interface RunInit {
  workflowId: string;
  requestId: string;
  transport: Transport;
  auth: DuoWorkflowAuth;
  call: WorkflowCall;
  /** The lock taken for this run (absent: blocking run without LockConcurrentFlow, or Redis down). */
  lock?: { token: string; acquiredAt: number };
  /** The actor slot taken with the lock's token (per-actor cap). */
  actorId?: string;
  /** Detached runs: stop with WORKHORSE_RUN_LIMIT after this long. */
  runLimitMs?: number;
  slot?: Slot;
  /** Blocking runs write each checkpoint to the caller. */
  onCheckpoint?: (action: Action) => void;
  /** Who asked for the run: relayed requests carry its X-Forwarded-For chain and address. */
  caller?: Caller;
}

export class Run implements RegisteredRun {
  readonly id = randomUUID();
  readonly workflowId: string;
  readonly transport: Transport;
  readonly startedAt = Date.now();
  readonly done: Promise<RunResult>;
  private state: RunState = 'starting';
  private actions = 0;
  private lastActionAt: number | undefined;
  private stopReason: string | undefined;
  private stopping: Promise<StopOutcome> | undefined;
  private clientGone = false;
  private accepted = false;
  private unwatchStop: (() => void) | undefined;
  private resolveStopSignal!: () => void;
  /** Resolves when the owner's stop signal is seen (before or after acceptance). */
  readonly stopSignalled: Promise<void> = new Promise((resolve) => (this.resolveStopSignal = resolve));
  private runLimitTimer: NodeJS.Timeout | undefined;
  private readonly abort = new AbortController();
  private mcp: McpSessions | undefined;
  private readonly stream: WorkflowStream;
  private readonly lease: Lease | undefined;

  constructor(
    private readonly init: RunInit,
    private readonly deps: RunDeps,
  ) {
    this.workflowId = init.workflowId;
    this.transport = init.transport;
    this.stream = new WorkflowStream(init.call, (action) => this.onAction(action));
    if (init.lock) {
      this.lease = new Lease(
        deps.backend,
        init.workflowId,
        init.lock.token,
        deps.leaseTtlMs,
        {
          onLost: (why) => {
            deps.metrics.lock('renew', 'lost');
            deps.logger.warn({ workflow_id: this.workflowId, run_id: this.id, why }, 'lease lost: stopping the run');
            void this.stop(LOCK_LOST, this.lockLostAckTimeoutMs());
          },
          onStop: (value) => this.onStopSignal(value),
          onRenew: (result) => deps.metrics.lock('renew', result),
          refresh: () => ({
            runId: this.id,
            state: this.state,
            lastActionAt: this.lastActionAt === undefined ? '' : new Date(this.lastActionAt).toISOString(),
            ...(init.actorId && init.lock ? { actor: { actorId: init.actorId, member: init.lock.token } } : {}),
          }),
        },
        init.lock.acquiredAt,
      );
      this.unwatchStop = deps.stopWatcher.watch(init.workflowId, (value) => this.onStopSignal(value));
    }
    if (init.runLimitMs !== undefined) {
      this.runLimitTimer = setTimeout(() => void this.stop(RUN_LIMIT), init.runLimitMs);
    }
    deps.registry.add(this);
    deps.metrics.connections.inc({ transport: this.transport });
    deps.metrics.connectionsOpen.inc({ transport: this.transport });
    deps.metrics.runsInFlight.set({ transport: this.transport }, deps.registry.count(this.transport));
    this.done = this.stream.ended.then((end) => this.teardown(end));
  }

  /** Resolves on the first Action (detached acceptance). */
  get firstAction(): Promise<void> {
    return this.stream.firstAction;
  }

  /** Resolves when the call has ended, before teardown finishes. */
  get streamEnded(): Promise<StreamEnd> {
    return this.stream.ended;
  }

  /** Sends the startRequest. */
  start(request: StartWorkflowRequest): void {
    this.stream.sendStart(request);
  }

  /**
   * The run was accepted (detached 202) or is streaming (blocking): its record is written.
   * Resolves once the record is stored (or failed to be: that is logged, never thrown), so
   * a 202 is never answered before the record can be read.
   */
  markRunning(): Promise<void> {
    if (this.state === 'starting') this.state = 'running';
    this.accepted = true;
    if (this.lease) {
      const record = {
        run_id: this.id,
        replica: this.deps.replicaId,
        transport: this.transport,
        state: this.state,
        started_at: new Date(this.startedAt).toISOString(),
        last_action_at: this.lastActionAt === undefined ? '' : new Date(this.lastActionAt).toISOString(),
      };
      return this.deps.backend.writeRunRecord(this.workflowId, record, this.deps.leaseTtlMs).catch((err: unknown) => {
        this.deps.logger.warn({ err, workflow_id: this.workflowId, run_id: this.id }, 'run record not written');
      });
    }
    return Promise.resolve();
  }

  /**
   * The owner's stop signal: the run acting on it deletes the key, then stops with the
   * key's value as the user reason.
   */
  private onStopSignal(value: string): void {
    if (this.state === 'ended' || this.stopping) return;
    this.resolveStopSignal();
    this.deps.backend.clearStop(this.workflowId).catch(() => undefined);
    void this.stop(userStopReason(value));
  }

  /**
   * A lost lease may be taken by another run once it expires: the handshake must end
   * before that, so it gets what is left of the lease, not the full ack timeout.
   */
  private lockLostAckTimeoutMs(): number {
    const left = this.lease ? this.lease.remainingMs - 50 : 0;
    return Math.max(1, Math.min(this.deps.stopAckTimeoutMs, left));
  }

  info(): RunInfo {
    return {
      workflow_id: this.workflowId,
      run_id: this.id,
      transport: this.transport,
      state: this.state,
      started_at: new Date(this.startedAt).toISOString(),
      last_action_at: this.lastActionAt === undefined ? null : new Date(this.lastActionAt).toISOString(),
      actions: this.actions,
    };
  }

  /**
   * Stops the run with `reason` through the stop handshake. The first reason wins;
   * later calls wait for the same end. Resolves when teardown is complete.
   */
  async stop(reason: string, ackTimeoutMs: number = this.deps.stopAckTimeoutMs): Promise<RunResult> {
    if (this.state !== 'ended' && this.stopping === undefined) {
      this.stopReason = reason;
      this.state = 'stopping';
      const started = performance.now();
      this.stopping = this.stream.stop(reason, ackTimeoutMs);
      void this.stopping.then((outcome) => this.deps.metrics.stopAck(outcome, (performance.now() - started) / 1000));
    }
    return this.done;
  }

  /** The caller hung up (blocking): cancel the stream at once. */
  cancel(): void {
    if (this.state === 'ended') return;
    this.clientGone = true;
    this.stream.cancel();
  }

  private onAction(action: Action): void {
    this.actions += 1;
    this.lastActionAt = Date.now();
    if (action.action === 'newCheckpoint') {
      this.deps.metrics.action('newCheckpoint');
      this.init.onCheckpoint?.(action);
      return;
    }
    void this.serve(action);
  }

  /** Checks the stop key, then serves the action; the answer is written exactly once. */
  private async serve(action: Action): Promise<void> {
    const requestID = action.requestID ?? '';
    if (this.lease) {
      const stop = await this.deps.backend.readStop(this.workflowId).catch(() => null);
      if (stop !== null) this.onStopSignal(stop);
    }
    if (this.stopping) {
      this.deps.metrics.action(action.action ?? 'unknown');
      const error = 'request aborted: the run is stopping';
      this.stream.respond(action.action === 'runHTTPRequest' ? { requestID, httpResponse: { error } } : { requestID, plainTextResponse: { error } });
      return;
    }
    await serveAction(action, {
      owner: this.deps.owner,
      metrics: this.deps.metrics,
      workflowId: this.workflowId,
      requestId: this.init.requestId,
      token: this.init.auth.Service.Headers?.['x-gitlab-oauth-token'] ?? '',
      timeoutHTTPRequests: this.init.auth.TimeoutHTTPRequests ?? false,
      signal: this.abort.signal,
      forwardedFor: forwardedForOf(this.init.caller),
      mcpServers: this.init.auth.McpServers,
      mcp: (this.mcp ??= new McpSessions(this.deps.mcpTimeoutMs)),
    }).then(
      (response) => {
        if (response) this.stream.respond(response);
      },
      (err: unknown) => {
        this.deps.logger.error({ err, workflow_id: this.workflowId, run_id: this.id }, 'serving an action failed');
        this.stream.respond({ requestID, plainTextResponse: { error: 'internal error' } });
      },
    );
  }

  private async teardown(end: StreamEnd): Promise<RunResult> {
    this.state = 'ended';
    clearTimeout(this.runLimitTimer);
    this.unwatchStop?.();
    this.abort.abort(RUN_ENDED);
    const stopOutcome = this.stopping ? await this.stopping : undefined;
    const reason: TeardownReason = this.stopReason
      ? teardownForStop(this.stopReason)
      : this.clientGone
        ? 'client_gone'
        : teardownForEnd(end.code);
    if (this.lease) {
      const actor = this.init.actorId && this.init.lock ? { actorId: this.init.actorId, member: this.init.lock.token } : undefined;
      this.deps.metrics.lock('release', (await this.lease.release(this.id, actor)) ? 'ok' : 'error');
    }
    this.deps.registry.remove(this);
    this.init.slot?.release();
    const durationMs = Date.now() - this.startedAt;
    const { metrics } = this.deps;
    metrics.connectionsOpen.dec({ transport: this.transport });
    metrics.runsInFlight.set({ transport: this.transport }, this.deps.registry.count(this.transport));
    metrics.sessionEnded(end.code, this.transport, durationMs / 1000);
    metrics.teardown(this.transport, reason);
    this.deps.logger.info(
      {
        request_id: this.init.requestId,
        workflow_id: this.workflowId,
        run_id: this.id,
        transport: this.transport,
        reason,
        duration_ms: durationMs,
        actions: this.actions,
        grpc_code: end.code,
        stop_outcome: stopOutcome,
      },
      'run ended',
    );
    // Only accepted runs: an end before the 202 was answered to the dispatcher itself.
    if (this.transport === 'detached' && this.accepted) {
      const result = await this.deps.owner.segmentEnd(
        {
          workflow_id: this.workflowId,
          run_id: this.id,
          // A detached run has no caller to lose: a cancel on close is a stream error to the owner.
          reason: reason === 'client_gone' ? 'stream_error' : reason,
          segment_duration_s: Math.round(durationMs / 100) / 10,
          actions: this.actions,
        },
        this.init.requestId,
        this.deps.callbackSignal,
      );
      metrics.callbacks.inc({ result });
      if (result === 'failed') {
        this.deps.logger.warn({ workflow_id: this.workflowId, run_id: this.id, reason }, 'segment-end callback lost');
      }
    }
    return { reason, end, stopOutcome, durationMs, actions: this.actions };
  }
}
