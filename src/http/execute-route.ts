/**
 * POST /api/v4/ai/duo_workflows/workflows/:workflow_id/execute (docs/spec.md §3), the HTTP side
 * of starting a run: ask the owner (preauth), read and decode the body, hand the
 * authorized start to the launcher (src/run/launcher.ts owns the order of §3), and turn
 * its outcome into a response — 202/200 JSON (detached), an ndjson stream (blocking),
 * or an error status (error-response.ts) — then log the request's one line.
 *
 * The request's lifetime is watched from the moment it arrives: a caller that hangs up
 * aborts the preauth, the body read and the launch wherever they are (nothing is left
 * taken), and ends a blocking run. The request is a SERVER span (tracing.ts), child of
 * the caller's traceparent; the start's spans are its children.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { callerOf } from '../core/caller';
import { GatewayError } from '../core/errors';
import { correlation, type Logger } from '../core/log';
import type { TraceSpan, Tracing } from '../observability/tracing';
import type { OwnerClient, PreauthDenial } from '../owner/owner-client';
import type { AuthorizedStart, Launcher } from '../run/launcher';
import type { RunMetrics } from '../run/metrics';
import { decodeStartRequest } from '../run/start-request';
import { transportLabels, type Transport } from '../core/vocabulary';
import { streamEndToError } from '../workflow/grpc-errors';
import { passDenial } from './denial-response';
import { sendError } from './error-response';
import { sendJson } from './json-response';
import { NdjsonResponse } from './ndjson-response';
import { readBody } from './read-body';
import { requestIdFrom } from './request-id';

export interface ExecuteRouteDeps {
  launcher: Launcher;
  owner: OwnerClient;
  /** Starts refused before a run started are counted with the run's. */
  metrics: RunMetrics;
  logger: Logger;
  /** Blocking: an empty ndjson line this often. */
  keepaliveMs: number;
  tracing: Tracing;
}

/** How a request was answered, for its log line: the outcome, or the error code. */
interface Answer {
  runId?: string | undefined;
  reason: string;
  /** The reason is an error code. */
  failed?: boolean;
}

/** The route's path, as express matches it (one segment, decoded, any case, a trailing slash allowed). */
export const EXECUTE_PATH = '/api/v4/ai/duo_workflows/workflows/:workflow_id/execute';

/**
 * The execute target as dispatchers write it — the path exactly, the id unencoded,
 * maybe a query — whose workflow id needs no router to read (main-app.ts serves these
 * without express); anything else goes through express's route for EXECUTE_PATH.
 */
const PLAIN_EXECUTE_TARGET = /^\/api\/v4\/ai\/duo_workflows\/workflows\/([A-Za-z0-9_.~-]+)\/execute(?:\?|$)/;

/** The workflow id of a plain execute target (see PLAIN_EXECUTE_TARGET), else undefined. */
export function plainExecuteWorkflowId(method: string | undefined, url: string | undefined): string | undefined {
  return method === 'POST' && url !== undefined ? PLAIN_EXECUTE_TARGET.exec(url)?.[1] : undefined;
}

/**
 * Serves one execute request; the request id is assigned already. `workflowId` is the
 * path's (for the log line: the run's is the owner's). Never rejects.
 */
export async function execute(deps: ExecuteRouteDeps, req: IncomingMessage, res: ServerResponse, workflowId: string | undefined): Promise<void> {
  const started = performance.now();
  const requestId = requestIdFrom(res) as string;
  const span = deps.tracing.request('execute', req.headers, requestId, workflowId);
  // Read now: once the caller hangs up its socket address is gone.
  const caller = callerOf(req);
  const gone = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  const { signal } = gone;
  let transport: Transport = 'blocking';
  let answer: Answer;
  try {
    deps.launcher.checkServing();
    const preauth = await deps.owner.preauthorize(req.method as string, req.url as string, req.headers, requestId, signal, 'execute', span);
    if (preauth.kind === 'denied') {
      answer = sendDenial(deps, res, preauth);
    } else {
      transport = preauth.answer.Detached === true ? 'detached' : 'blocking';
      deps.tracing.note(span, { workflowId: preauth.answer.DuoWorkflow.WorkflowID, transport });
      const start = { auth: preauth.answer.DuoWorkflow, request: decodeStartRequest(await readBody(req, res)), requestId, caller, signal, span };
      answer = transport === 'detached' ? await answerDetached(deps, res, start, span) : await streamBlocking(deps, res, start);
    }
  } catch (err) {
    // Whatever failed after the caller left failed because it left.
    const error = sendError(res, signal.aborted ? asClientGone(err) : err, deps.logger);
    deps.metrics.connectionError(transport, error.errorType);
    answer = { runId: error.runId, reason: error.code, failed: true };
  }
  deps.tracing.requestEnded(span, { status: res.statusCode, runId: answer.runId, errorCode: answer.failed || res.statusCode >= 400 ? answer.reason : undefined });
  deps.logger.info(
    {
      ...correlation(requestId),
      workflow_id: workflowId,
      run_id: answer.runId,
      transport: transportLabels[transport],
      reason: answer.reason,
      status: res.statusCode,
      duration_ms: Math.round(performance.now() - started),
      ...span.logFields,
    },
    'execute request',
  );
}

function asClientGone(err: unknown): GatewayError {
  if (err instanceof GatewayError && err.code === 'CLIENT_GONE') return err;
  return new GatewayError('CLIENT_GONE', 'the caller hung up', { cause: err, runId: err instanceof GatewayError ? err.runId : undefined });
}

/** The owner's own refusal, passed through: status, end-to-end headers, first 32 KiB of body. */
function sendDenial(deps: ExecuteRouteDeps, res: ServerResponse, denial: PreauthDenial): Answer {
  passDenial(res, denial);
  deps.metrics.connectionError('blocking', 'preauth');
  return { reason: 'PREAUTH_DENIED' };
}

/** Detached (docs/spec.md §3b): 202 once accepted, 200 when the turn finished before that. */
async function answerDetached(deps: ExecuteRouteDeps, res: ServerResponse, start: AuthorizedStart, span: TraceSpan): Promise<Answer> {
  const workflowId = start.auth.WorkflowID;
  const outcome = await deps.launcher.launch({ ...start, transport: 'detached' });
  if (outcome.kind === 'accepted') {
    deps.tracing.accepted(span, outcome.acceptedOn);
    sendJson(res, 202, { status: 'accepted', workflow_id: workflowId, run_id: outcome.runId, accepted_on: outcome.acceptedOn });
    return { runId: outcome.runId, reason: 'accepted' };
  }
  sendJson(res, 200, { status: 'finished', workflow_id: workflowId, run_id: outcome.runId });
  return { runId: outcome.runId, reason: 'finished' };
}

/**
 * Blocking (docs/spec.md §3a): checkpoints as ndjson lines, 200 committed on the first one. A
 * stream that fails before that is a real status; after it, the stream just ends. The
 * caller hanging up cancels the run.
 */
async function streamBlocking(deps: ExecuteRouteDeps, res: ServerResponse, start: AuthorizedStart): Promise<Answer> {
  const out = new NdjsonResponse(res, deps.keepaliveMs);
  // The caller's signal is bound to the run by the launcher: a hang-up cancels it.
  const streaming = await deps.launcher.launch({ ...start, transport: 'blocking', sink: out });
  out.keepAlive();
  const result = await streaming.done;
  if (!out.committed && result.reason !== 'finished' && result.reason !== 'client_gone') {
    out.stop();
    // A drain before the first line is the gateway going away, not the service failing:
    // the caller retries elsewhere (Workhorse answers an empty 200, which reads as a finished turn).
    if (result.reason === 'drain') throw new GatewayError('DRAINING', 'the gateway is shutting down: retry on another replica', { runId: streaming.runId });
    throw streamEndToError(result.end, streaming.runId);
  }
  out.end();
  return { runId: streaming.runId, reason: result.reason };
}
