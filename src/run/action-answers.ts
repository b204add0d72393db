/**
 * Serves one Action from the workflow service (docs/spec.md §4): runHTTPRequest is relayed to the
 * owner API, runMCPTool is called on the MCP server that offered the tool, newCheckpoint
 * needs no answer, scheduleNotification is declined with
 * scheduleNotificationResponse{accepted: false}, everything else is refused with the
 * "action cannot be executed by this client" error. Every answer the service waits for
 * is produced here, exactly once.
 */
import type { TraceSpan } from '../observability/tracing';
import type { BillingStream } from '../workflow/billing-stream';
import type { McpToolbox } from '../mcp/toolbox';
import type { OwnerClient } from '../owner/owner-client';
import type { Action, ActionResponse, RunHTTPRequest } from '../workflow/contract';
import type { RunMetrics } from './metrics';

/** Why every scheduleNotification is declined (the service shows or logs it). */
export const SCHEDULE_NOTIFICATION_DECLINED = 'notifications cannot be scheduled by this client: longrun schedules nothing';

/**
 * An error answer of the type the service reads for this action: httpResponse for a
 * relay, scheduleNotificationResponse (declined) for a notification, plain text otherwise.
 */
export function errorAnswer(action: Action, error: string): ActionResponse {
  const requestID = action.requestID ?? '';
  if (action.action === 'runHTTPRequest') return { requestID, httpResponse: { error } };
  if (action.action === 'scheduleNotification') return { requestID, scheduleNotificationResponse: { accepted: false, reason: error } };
  return { requestID, plainTextResponse: { error } };
}

export interface ActionContext {
  /** Relays are counted by the owner client; every action here. */
  owner: OwnerClient;
  metrics: RunMetrics;
  workflowId: string;
  requestId: string;
  /** The user's API token (Service.Headers["x-gitlab-oauth-token"]). */
  token: string;
  timeoutHTTPRequests: boolean;
  /** Aborted when the run ends: in-flight relays and MCP calls answer "request aborted". */
  signal: AbortSignal;
  /** X-Forwarded-For for relayed requests: the caller's chain plus its address (caller.ts). */
  forwardedFor: string | undefined;
  /** The run's MCP tools (discovered at its start). */
  mcp: McpToolbox;
  /** Self-hosted billing, when the owner named a cloud service for it. */
  billing: BillingStream | undefined;
  /** The run's span: each relay and tool call is a child of it. */
  span: TraceSpan;
}

/** The answer to an action, or null for actions that take none (newCheckpoint). */
export function serveAction(action: Action, ctx: ActionContext): Promise<ActionResponse | null> {
  const requestID = action.requestID ?? '';
  const kind = action.action ?? 'unknown';
  ctx.metrics.action(kind);
  switch (kind) {
    case 'newCheckpoint':
      return Promise.resolve(null);
    case 'runHTTPRequest':
      return relayAction(requestID, action.runHTTPRequest ?? {}, ctx);
    case 'runMCPTool': {
      const tool = action.runMCPTool ?? {};
      return ctx.mcp.call(tool.name ?? '', tool.args, ctx.signal, ctx.span).then((plainTextResponse) => ({ requestID, plainTextResponse }));
    }
    case 'trackLlmCallForSelfHosted':
      if (ctx.billing) return trackLlmCall(requestID, action, ctx.billing);
      return Promise.resolve({ requestID, plainTextResponse: { error: `action cannot be executed by this client: ${kind}` } });
    case 'scheduleNotification':
      // Answered in the response type the service expects for it (docs/spec.md §4), declined.
      return Promise.resolve({ requestID, scheduleNotificationResponse: { accepted: false, reason: SCHEDULE_NOTIFICATION_DECLINED } });
    default:
      return Promise.resolve({ requestID, plainTextResponse: { error: `action cannot be executed by this client: ${kind}` } });
  }
}

/**
 * Workhorse's answer to a tracked LLM call: the event goes to the cloud service, and once
 * it is acknowledged the service gets an empty plainTextResponse. (Workhorse ends the whole
 * run when the billing stream fails; longrun answers the action with the error and goes on.)
 */
function trackLlmCall(requestID: string, action: Action, billing: BillingStream): Promise<ActionResponse> {
  const call = (action.trackLlmCallForSelfHosted ?? {}) as { workflowID?: string; featureQualifiedName?: string; featureAiCatalogItem?: boolean };
  return billing
    .track({ requestID, workflowID: call.workflowID ?? '', featureQualifiedName: call.featureQualifiedName ?? '', featureAiCatalogItem: call.featureAiCatalogItem ?? false })
    .then(
      (): ActionResponse => ({ requestID, plainTextResponse: {} }),
      (err: unknown): ActionResponse => ({ requestID, plainTextResponse: { error: `failed to track the LLM call with the cloud service: ${(err as Error).message}` } }),
    );
}

function relayAction(requestID: string, http: RunHTTPRequest, ctx: ActionContext): Promise<ActionResponse> {
  const relayed = ctx.owner.relay({
    method: http.method ?? 'GET',
    path: http.path ?? '',
    body: http.body,
    token: ctx.token,
    workflowId: ctx.workflowId,
    requestId: ctx.requestId,
    timeout: ctx.timeoutHTTPRequests,
    signal: ctx.signal,
    forwardedFor: ctx.forwardedFor,
    parent: ctx.span,
  });
  return relayed.then((result): ActionResponse => {
    if (!result.ok) {
      // A body over the cap still carries its status, headers and the body up to the cap.
      const { statusCode, headers, body, error } = result;
      return { requestID, httpResponse: { statusCode, headers, body, error } };
    }
    return { requestID, httpResponse: { statusCode: result.statusCode, headers: result.headers, body: result.body } };
  });
}
