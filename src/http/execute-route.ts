/**
 * POST /api/v4/ai/duo_workflows/workflows/:workflow_id/execute (SPEC §3), in the order
 * the spec fixes: preauth → validate body → caps and lock → open the gRPC stream →
 * send startRequest → serve actions, answering blocking (ndjson) or detached (202) as
 * the owner decided. No stream is opened for a request that fails before it.
 */
import type { Request, Response } from 'express';
import type { Config } from '../config';
import { GatewayError } from '../errors';
import type { Logger } from '../log';
import type { Metrics, Transport } from '../metrics';
import type { OwnerClient } from '../owner/owner-client';
import type { DuoWorkflowAuth } from '../owner/preauth';
import type { CoordinationBackend } from '../coordination/backend';
import type { StopWatcher } from '../coordination/stop-watcher';
import { awaitAcceptance } from '../run/acceptance';
import { admit, type HeldLock } from '../run/admission';
import type { RunRegistry, Slot } from '../run/registry';
import { Run } from '../run/run';
import { authorizeStartRequest, callMetadata, decodeStartRequest } from '../run/start-request';
import type { ChannelPool } from '../workflow/channel-pool';
import type { StartWorkflowRequest } from '../workflow/contract';
import { streamEndToError } from '../workflow/grpc-errors';
import { workhorseActionJson } from '../workflow/action-line';
import { sendError } from './error-response';
import { NdjsonResponse } from './ndjson-response';
import { readBody } from './read-body';
import { requestIdFrom } from './request-id';

export interface ExecuteContext {
  config: Config;
  owner: OwnerClient;
  channels: ChannelPool;
  backend: CoordinationBackend;
  stopWatcher: StopWatcher;
  registry: RunRegistry;
  metrics: Metrics;
  logger: Logger;
  isDraining(): boolean;
  /** Bounds segment-end callbacks; aborted when a drain's budget is spent. */
  callbackSignal: AbortSignal;
}

function drainingError(): GatewayError {
  return new GatewayError('DRAINING', 'this instance is shutting down; retry on another', { retryAfterS: 1 });
}

export function executeHandler(ctx: ExecuteContext) {
  return (req: Request, res: Response): void => {
    const started = performance.now();
    let transport: Transport = 'http';
    let runId: string | undefined;
    const seen = { transport: (t: Transport) => (transport = t), run: (id: string) => (runId = id) };
    void execute(ctx, req, res, seen).then(
      (reason) => logRequest(ctx, req, res, { transport, runId, reason }, started),
      (err: unknown) => {
        const error = sendError(res, err, ctx.logger);
        ctx.metrics.connectionError(transport, errorType(error.code));
        logRequest(ctx, req, res, { transport, runId, reason: error.code }, started);
      },
    );
  };
}

function errorType(code: string): string {
  switch (code) {
    case 'PREAUTH_DENIED':
    case 'PREAUTH_INVALID':
    case 'OWNER_UNAVAILABLE':
      return 'preauth';
    case 'INVALID_REQUEST':
      return 'bad_request';
    case 'WORKFLOW_LOCKED':
    case 'LOCK_UNAVAILABLE':
      return 'lock';
    case 'CAPACITY_EXHAUSTED':
    case 'ACTOR_LIMIT':
    case 'DRAINING':
      return 'capacity';
    case 'WORKFLOW_SERVICE_UNAVAILABLE':
      return 'stream_open';
    case 'USAGE_QUOTA_EXCEEDED':
    case 'STOPPED':
      return 'rejected';
    default:
      return 'internal';
  }
}

/** The one log line of an execute request (SPEC §7); `reason` is the outcome or the error code. */
function logRequest(
  ctx: ExecuteContext,
  req: Request,
  res: Response,
  fields: { transport: Transport; runId: string | undefined; reason: string },
  started: number,
): void {
  res.locals['logged'] = true;
  ctx.logger.info(
    {
      request_id: requestIdFrom(res),
      workflow_id: req.params['workflow_id'],
      run_id: fields.runId,
      transport: fields.transport,
      reason: fields.reason,
      status: res.statusCode,
      duration_ms: Math.round(performance.now() - started),
    },
    'execute request',
  );
}

interface Seen {
  transport(t: Transport): void;
  run(id: string): void;
}

async function execute(ctx: ExecuteContext, req: Request, res: Response, seen: Seen): Promise<string> {
  const requestId = requestIdFrom(res);
  if (ctx.isDraining()) throw drainingError();

  const preauth = await ctx.owner.preauthorize(req.method, req.originalUrl, req.headers, requestId);
  if (preauth.kind === 'denied') {
    // The owner's own answer, passed through (first 32 KiB).
    res.status(preauth.status);
    if (preauth.contentType) res.setHeader('Content-Type', preauth.contentType);
    res.setHeader('X-Longrun-Error-Code', 'PREAUTH_DENIED');
    res.end(preauth.body);
    ctx.metrics.connectionError('http', 'preauth');
    return 'PREAUTH_DENIED';
  }
  const auth = preauth.answer.DuoWorkflow;
  const detached = preauth.answer.Detached === true;
  const transport: Transport = detached ? 'detached' : 'http';
  seen.transport(transport);

  const request = authorizeStartRequest(decodeStartRequest(await readBody(req, res)), auth);

  let slot: Slot | undefined;
  let lock: HeldLock | undefined;
  try {
    if (detached) {
      slot = ctx.registry.reserveDetached();
      if (!slot) {
        ctx.metrics.capRejections.inc({ cap: 'process' });
        throw new GatewayError('CAPACITY_EXHAUSTED', 'this instance holds its maximum of detached runs', { retryAfterS: 5 });
      }
    }
    if (detached || auth.LockConcurrentFlow) {
      lock = await admit(
        auth.WorkflowID,
        detached ? 'required' : 'best_effort',
        auth.ActorID ?? undefined,
        { backend: ctx.backend, metrics: ctx.metrics, logger: ctx.logger, leaseTtlMs: ctx.config.leaseTtlMs, maxRunsPerActor: ctx.config.maxRunsPerActor },
        requestId,
      );
    }
    if (ctx.isDraining()) throw drainingError();
  } catch (err) {
    slot?.release();
    if (lock) await releaseUnused(ctx, auth.WorkflowID, lock);
    throw err;
  }

  return detached
    ? runDetached(ctx, res, auth, request, requestId, lock, slot, seen)
    : runBlocking(ctx, req, res, auth, request, requestId, lock, seen);
}

/** Gives back a lock (and actor slot) taken for a run that never started. */
async function releaseUnused(ctx: ExecuteContext, workflowId: string, lock: HeldLock): Promise<void> {
  const actor = lock.actorId ? { actorId: lock.actorId, member: lock.token } : undefined;
  await ctx.backend.release(workflowId, lock.token, '', actor).catch(() => undefined);
}

function openRun(
  ctx: ExecuteContext,
  auth: DuoWorkflowAuth,
  requestId: string,
  transport: Transport,
  lock: HeldLock | undefined,
  extra: { slot?: Slot; runLimitMs?: number; onCheckpoint?: (action: object) => void },
): Run {
  let call;
  try {
    call = ctx.channels.open(auth.Service.URI, auth.Service.Secure ?? false, callMetadata(auth, requestId));
  } catch (err) {
    extra.slot?.release();
    if (lock) void releaseUnused(ctx, auth.WorkflowID, lock);
    throw new GatewayError('WORKFLOW_SERVICE_UNAVAILABLE', 'workflow service could not be reached', { cause: err });
  }
  return new Run(
    { workflowId: auth.WorkflowID, requestId, transport, auth, call, lock, actorId: lock?.actorId, ...extra },
    {
      owner: ctx.owner,
      metrics: ctx.metrics,
      logger: ctx.logger,
      registry: ctx.registry,
      backend: ctx.backend,
      stopWatcher: ctx.stopWatcher,
      replicaId: ctx.config.replicaId,
      stopAckTimeoutMs: ctx.config.stopAckTimeoutMs,
      leaseTtlMs: ctx.config.leaseTtlMs,
      mcpTimeoutMs: ctx.config.relayTimeoutMs * 6,
      callbackSignal: ctx.callbackSignal,
    },
  );
}

async function runBlocking(
  ctx: ExecuteContext,
  req: Request,
  res: Response,
  auth: DuoWorkflowAuth,
  request: StartWorkflowRequest,
  requestId: string,
  lock: HeldLock | undefined,
  seen: Seen,
): Promise<string> {
  const out = new NdjsonResponse(res, ctx.config.keepaliveMs);
  let run: Run;
  try {
    run = openRun(ctx, auth, requestId, 'http', lock, {
      onCheckpoint: (action) => out.writeLine(workhorseActionJson(action)),
    });
  } catch (err) {
    out.stop();
    throw err;
  }
  seen.run(run.id);
  // The caller hanging up cancels the stream (and teardown releases the lock).
  res.on('close', () => {
    if (!res.writableFinished) run.cancel();
  });
  void run.markRunning();
  run.start(request);
  const result = await run.done;
  if (!out.committed && result.reason !== 'finished' && result.reason !== 'client_gone') {
    out.stop();
    throw streamEndToError(result.end);
  }
  out.end();
  return result.reason;
}

async function runDetached(
  ctx: ExecuteContext,
  res: Response,
  auth: DuoWorkflowAuth,
  request: StartWorkflowRequest,
  requestId: string,
  lock: HeldLock | undefined,
  slot: Slot | undefined,
  seen: Seen,
): Promise<string> {
  const run = openRun(ctx, auth, requestId, 'detached', lock, { slot, runLimitMs: ctx.config.runLimitMs });
  seen.run(run.id);
  const sentAt = performance.now();
  run.start(request);
  const acceptance = await awaitAcceptance(run, ctx.config.acceptWaitMs);
  if (acceptance.kind !== 'accepted') {
    // Ended or stopped before acceptance: teardown (lock, slot) completes before the caller hears.
    const result = await run.done;
    if (acceptance.kind === 'stopped' || result.reason === 'stop_requested') {
      throw new GatewayError('STOPPED', 'the owner stopped this workflow before the run was accepted');
    }
    // Drained before acceptance: the turn was handed back; the caller retries elsewhere.
    if (result.reason === 'drain') throw drainingError();
    if (result.end.code !== 0) throw streamEndToError(result.end);
    res.status(200).json({ status: 'finished', workflow_id: auth.WorkflowID, run_id: run.id });
    return 'finished';
  }
  await run.markRunning();
  ctx.metrics.acceptDuration.observe({ accepted_on: acceptance.on }, (performance.now() - sentAt) / 1000);
  res.status(202).json({ status: 'accepted', workflow_id: auth.WorkflowID, run_id: run.id, accepted_on: acceptance.on });
  return 'accepted';
}
