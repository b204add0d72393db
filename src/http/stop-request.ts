/**
 * The body of `POST /internal/workflows/:id/stop` (docs/spec.md §1, §5): optional, and
 * `{"reason": "TOKEN"}` names the user reason the run is stopped with (USER_STOP when it
 * names none). The route reads it with stopRequestSchema, the schema docs/openapi.json
 * gives for it.
 */
import { z } from 'zod';
import { GatewayError } from '../core/errors';
import { STOP_REASON_TOKEN, USER_STOP } from '../run/stop-reasons';

const REASON_RULE = 'reason must match [A-Z][A-Z0-9_]{0,63}';

export const stopRequestSchema = z.object({
  reason: z
    .string({ error: REASON_RULE })
    .regex(STOP_REASON_TOKEN, { error: REASON_RULE })
    .optional()
    .describe(`The reason the run is stopped with, sent to the workflow service; ${USER_STOP} when absent.`),
});

/** The user reason a stop body names; throws INVALID_REQUEST for a body that is not JSON or names an unusable reason. */
export function stopReasonOf(body: Buffer): string {
  if (body.length === 0) return USER_STOP;
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    throw new GatewayError('INVALID_REQUEST', 'body must be JSON');
  }
  // A JSON value that is no object names no reason (as the route always read it).
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return USER_STOP;
  const parsed = stopRequestSchema.safeParse(json);
  if (!parsed.success) throw new GatewayError('INVALID_REQUEST', parsed.error.issues[0]?.message ?? REASON_RULE);
  return parsed.data.reason ?? USER_STOP;
}
