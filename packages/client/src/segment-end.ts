/**
 * The owner's side of the segment-end callback (docs/spec.md §6): `POST
 * /api/v4/internal/ai/duo_workflows/workflows/:id/segment_end`, sent by the gateway at
 * the end of every accepted detached run with `Gitlab-Workhorse-Api-Request: <JWT>` (HS256
 * with the shared secret, iss "gitlab-workhorse"). verifySegmentEnd() checks the JWT and
 * parses the body; the owner then acts on the reason — idempotently: the gateway retries
 * on 5xx, 429 and network errors, so the same (workflow, run id) may arrive twice.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';
import { verifyGatewayToken, type GatewayTokenOptions } from './jwt';
import { inFlightSchema } from './responses';
import { finalSegmentEndReasons, resumableSegmentEndReasons, segmentEndReasons, type SegmentEndReason } from './vocabulary';

export const segmentEndSchema = z.object({
  workflow_id: z.string().min(1),
  run_id: z.string().min(1),
  reason: z.enum(segmentEndReasons),
  segment_duration_s: z.number().nonnegative(),
  actions: z.number().int().nonnegative(),
  // Gateways from before docs/spec.md §6 `in_flight` do not send it: nothing known to be in flight.
  in_flight: inFlightSchema.default([]),
  // Present (true) when the gateway's stop crossed the service's OK end and nothing said the
  // turn was over: the reason is the stop's, but the turn may have finished. Check the
  // workflow's state before dispatching the next segment.
  ended_while_stopping: z.boolean().optional(),
});

/** A segment-end callback's body: what the gateway sends (its src/run/run-end.ts) and verifySegmentEnd() resolves with. */
export type SegmentEnd = z.infer<typeof segmentEndSchema>;

/** Why a callback was refused, with the status to answer (401 bad or missing JWT, 400 bad body). */
export class SegmentEndRejected extends Error {
  constructor(
    readonly status: 400 | 401,
    message: string,
  ) {
    super(message);
    this.name = 'SegmentEndRejected';
  }
}

export interface SegmentEndRequest {
  /** The request's headers (node's lower-case record, or a fetch Headers). */
  headers: IncomingHttpHeaders | Headers;
  /** The raw body (text or bytes), or the JSON already parsed by a body parser. */
  body: unknown;
  /** The workflow id of the request path, when known: it must be the body's. */
  workflowId?: string;
}

function tokenOf(headers: IncomingHttpHeaders | Headers): string | undefined {
  if (headers instanceof Headers) return headers.get('gitlab-workhorse-api-request') ?? undefined;
  const value = headers['gitlab-workhorse-api-request'];
  return Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value;
}

/** How the callback's token is checked: its oldest `iat` (`maxAgeS`, default 90 s, as Rails). */
export type SegmentEndVerifyOptions = Pick<GatewayTokenOptions, 'maxAgeS'>;

/**
 * Checks a segment-end callback: the Gitlab-Workhorse-Api-Request JWT (HS256 with
 * `secret`, iss "gitlab-workhorse", `iat` at most `options.maxAgeS` old: 90 s by default,
 * what Rails' verify_api_request! allows) and the body (zod). Resolves with the body; throws
 * SegmentEndRejected (401 for the token, 400 for the body) otherwise.
 */
export async function verifySegmentEnd(secret: Uint8Array, request: SegmentEndRequest, options: SegmentEndVerifyOptions = {}): Promise<SegmentEnd> {
  const token = tokenOf(request.headers);
  if (!token || !(await verifyGatewayToken(secret, token, options))) throw new SegmentEndRejected(401, 'missing or invalid Gitlab-Workhorse-Api-Request');
  let json: unknown = request.body;
  if (typeof json === 'string' || Buffer.isBuffer(json)) {
    try {
      json = JSON.parse(json.toString());
    } catch {
      throw new SegmentEndRejected(400, 'body is not JSON');
    }
  }
  const parsed = segmentEndSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new SegmentEndRejected(400, `body is not a segment end: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`);
  }
  if (request.workflowId !== undefined && request.workflowId !== parsed.data.workflow_id) {
    throw new SegmentEndRejected(400, 'body workflow_id differs from the path');
  }
  return parsed.data;
}

/** The workflow is still `running`: the owner dispatches the next segment (it resumes from the latest checkpoint). */
export function isResumable(reason: SegmentEndReason): boolean {
  return (resumableSegmentEndReasons as readonly string[]).includes(reason);
}

/** The turn is over (finished, or stopped by the owner): the owner records it and dispatches nothing. */
export function isFinal(reason: SegmentEndReason): boolean {
  return (finalSegmentEndReasons as readonly string[]).includes(reason);
}
