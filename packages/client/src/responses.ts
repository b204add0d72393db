/**
 * How the gateway's answers become results and errors (docs/spec.md §3 status table,
 * docs/errors.md): read here once, so execute, stop and getRun agree.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';
import { LongrunError } from './errors';
import type { InFlightEntry, RunRecord } from './outcomes';
import { acceptedOn, inFlightKinds, storeFences, type StoreFence } from './vocabulary';

/** What an answer is read into before it is judged. */
export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body (at most ERROR_BODY_LIMIT bytes of it). */
  text: string;
  endpoint: string;
  /** The X-Request-Id the gateway answered with, else the one sent. */
  requestId: string;
}

/** Error answers and JSON results are small; the owner's refusals are cut at 32 KiB by the gateway. */
export const ERROR_BODY_LIMIT = 64 * 1024;

// `fence` is read loosely: a word a newer gateway adds is not a reason to drop the whole body.
export const errorBodySchema = z.object({ error: z.object({ code: z.string(), message: z.string(), retryable: z.boolean(), fence: z.string().optional() }) });

export const acceptedSchema = z.object({ status: z.literal('accepted'), workflow_id: z.string(), run_id: z.string(), accepted_on: z.enum(acceptedOn) });
export const finishedSchema = z.object({ status: z.literal('finished'), workflow_id: z.string(), run_id: z.string() });
export const stopRequestedSchema = z.object({ status: z.literal('stop_requested'), workflow_id: z.string(), reason: z.string() });
export const inFlightSchema = z.array(z.object({ kind: z.enum(inFlightKinds), request_id: z.string(), method: z.string() })) satisfies z.ZodType<InFlightEntry[]>;
export const runRecordSchema = z.object({
  workflow_id: z.string(),
  run_id: z.string(),
  replica: z.string(),
  transport: z.string(),
  state: z.string(),
  started_at: z.string(),
  last_action_at: z.string(),
  in_flight: inFlightSchema.optional(),
}) satisfies z.ZodType<RunRecord>;

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Retry-After in seconds: delta-seconds, or an HTTP date (seconds from now, at least 0). */
export function retryAfterOf(headers: IncomingHttpHeaders, now = Date.now()): number | undefined {
  const value = header(headers, 'retry-after')?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1_000));
}

function isStoreFence(word: string | undefined): word is StoreFence {
  return (storeFences as readonly (string | undefined)[]).includes(word);
}

/** Proxies in front of a gateway answer these for an upstream that is down or restarting. */
const TRANSIENT_STATUSES = new Set([502, 503, 504]);

/** The error an answer that is not a success stands for. */
export function errorOf(answer: Answer): LongrunError {
  const { status, headers, text, endpoint, requestId } = answer;
  const retryAfterS = retryAfterOf(headers);
  const context = { status, retryAfterS, requestId, endpoint };
  // The owner's own refusal, passed through with its status, headers and body. Its 429 (Rails'
  // rate limit on the execute preauth) says "later": retried after its Retry-After.
  if (header(headers, 'x-longrun-error-code') === 'PREAUTH_DENIED') {
    return new LongrunError('PREAUTH_DENIED', `the owner refused the request (${status})`, { ...context, retryable: status === 429, body: text });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // Not the gateway's: judged by its status alone, below.
  }
  const parsed = errorBodySchema.safeParse(json);
  if (parsed.success) {
    const { code, message, retryable, fence } = parsed.data.error;
    return new LongrunError(code, message, { ...context, retryable, ...(isStoreFence(fence) ? { fence } : {}) });
  }
  return new LongrunError('UNEXPECTED_RESPONSE', `unexpected answer ${status} from ${endpoint}`, {
    ...context,
    retryable: TRANSIENT_STATUSES.has(status),
    body: text.slice(0, 1_024),
  });
}

/** Parses a JSON success body with `schema`; an unreadable one is UNEXPECTED_RESPONSE (not retried: the request was served). */
export function parseBody<T>(answer: Answer, schema: z.ZodType<T>): T {
  let json: unknown;
  try {
    json = JSON.parse(answer.text);
  } catch {
    json = undefined;
  }
  const parsed = schema.safeParse(json);
  if (parsed.success) return parsed.data;
  throw new LongrunError('UNEXPECTED_RESPONSE', `unreadable ${answer.status} answer from ${answer.endpoint}`, {
    status: answer.status,
    retryable: false,
    requestId: answer.requestId,
    endpoint: answer.endpoint,
    body: answer.text.slice(0, 1_024),
  });
}

/** Whether a response is a blocking stream (application/x-ndjson) rather than JSON. */
export function isNdjson(headers: IncomingHttpHeaders): boolean {
  return (header(headers, 'content-type') ?? '').split(';')[0]?.trim().toLowerCase() === 'application/x-ndjson';
}

export { header as headerValue };
