/**
 * The pre-authorization answer (docs/spec.md §2): its schema, and the request headers that are
 * copied to the owner.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';

export const PREAUTH_CONTENT_TYPE = 'application/vnd.gitlab-workhorse+json';
/** How much of a refusal's body is passed back to the caller. */
export const DENIAL_BODY_LIMIT = 32 * 1024;

const stringMap = z.record(z.string(), z.string());
const idString = z.union([z.string().min(1), z.number().int()]).transform(String);

const mcpServerSchema = z.object({
  URL: z.string().optional(),
  Headers: stringMap.nullish(),
  Tools: z.array(z.string()).nullish(),
  PreApprovedTools: z.array(z.string()).nullish(),
  Trusted: z.boolean().nullish(),
});

export const preauthSchema = z.object({
  DuoWorkflow: z.object({
    Service: z.object({
      URI: z.string().min(1),
      Headers: stringMap.nullish(),
      Secure: z.boolean().nullish(),
    }),
    McpServers: z.record(z.string(), mcpServerSchema).nullish(),
    /** Self-hosted instances: where each LLM call is tracked for billing (docs/spec.md §11). */
    CloudServiceForSelfHosted: z.object({ URI: z.string(), Headers: stringMap.nullish(), Secure: z.boolean().nullish() }).nullish(),
    LockConcurrentFlow: z.boolean().nullish(),
    ServerCapabilities: z.array(z.string()).nullish(),
    TimeoutHTTPRequests: z.boolean().nullish(),
    WorkflowID: idString,
    ActorID: idString.nullish(),
  }),
  Detached: z.boolean().nullish(),
});

/**
 * The WebSocket route's answer (docs/spec.md §11): the same, but the owner names no
 * workflow — the client names it in its startRequest — so WorkflowID may be absent
 * (read as '').
 */
export const websocketPreauthSchema = preauthSchema.extend({
  DuoWorkflow: preauthSchema.shape.DuoWorkflow.extend({ WorkflowID: idString.nullish().transform((id) => id ?? '') }),
});

/**
 * The follow route's answer (docs/spec.md §14): the owner decides who may follow a workflow;
 * nothing of the answer is used but its verdict. A 200 of the preauth content type whose
 * JSON is an object; `DuoWorkflow.WorkflowID`, when the owner names one, must be the
 * workflow followed (an execute's preauth answer is one).
 */
export const followPreauthSchema = z.looseObject({ DuoWorkflow: z.looseObject({ WorkflowID: idString.nullish() }).nullish() });

export type PreauthAnswer = z.infer<typeof preauthSchema>;
export type DuoWorkflowAuth = PreauthAnswer['DuoWorkflow'];
export type McpServer = z.infer<typeof mcpServerSchema>;

// Not forwarded: the body is not sent, and hop-by-hop headers belong to one connection.
const droppedHeaders = new Set([
  'content-type',
  'content-encoding',
  'content-length',
  'content-disposition',
  'accept-encoding',
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'expect',
  // Set by longrun itself; a caller must not be able to supply them.
  'gitlab-workhorse',
  'gitlab-workhorse-api-request',
  'x-request-id',
]);

/** The caller's headers as they are forwarded to the owner's preauth. */
export function forwardedHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const named = String(headers['connection'] ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || droppedHeaders.has(name) || named.includes(name)) continue;
    out[name] = value;
  }
  return out;
}
