/**
 * The error answers of an operation, from the catalog (src/core/errors.ts: retryable, Retry-After)
 * and the one status table (src/http/error-status.ts): its codes grouped by status, each
 * status one response whose body's `code` is one of them and whose `Retry-After` header says
 * the seconds each code asks for. PREAUTH_DENIED keeps the owner's status: it is the
 * operation's `default` answer.
 */
import { errorCatalog, type ErrorCode } from '../src/core/errors';
import { errorStatus, retryAfterOf } from '../src/http/error-status';
import { schemaRef } from './schemas';
import type { JsonSchema } from './protojson-schema';

export const HEADERS = '#/components/headers/';

/** What the catalog says of a code, in a few words. */
function codeLine(code: ErrorCode): string {
  const retryAfterS = retryAfterOf(code, undefined);
  const retry = errorCatalog[code].retryable ? 'retryable' : 'not retryable';
  return `\`${code}\` (${retry}${retryAfterS === undefined ? '' : `, Retry-After ${retryAfterS} s`})`;
}

/** The owner's refusal of the preauth, passed through (docs/spec.md §2). */
export function preauthDenied(): JsonSchema {
  return {
    description:
      'PREAUTH_DENIED: the owner refused the preauthorization. Its status, end-to-end headers (its own `Retry-After` among them) and the first 32 KiB of its body are passed through as it sent them.',
    headers: {
      'X-Longrun-Error-Code': { description: 'Always `PREAUTH_DENIED`.', required: true, schema: { type: 'string', const: 'PREAUTH_DENIED' } },
      'X-Request-Id': { $ref: `${HEADERS}X-Request-Id` },
    },
  };
}

/** The responses for `codes`, by status; PREAUTH_DENIED, when among them, as `default`. */
export function errorResponses(codes: readonly ErrorCode[]): Record<string, JsonSchema> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    if (code === 'PREAUTH_DENIED') continue;
    const status = errorStatus[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, JsonSchema> = {};
  for (const [status, group] of [...byStatus].sort(([a], [b]) => a - b)) {
    const waits = group.filter((code) => retryAfterOf(code, undefined) !== undefined);
    const retryAfter =
      waits.length === 0
        ? {}
        : {
            'Retry-After': {
              description: `Seconds to wait before trying again: ${waits.map((code) => `${retryAfterOf(code, undefined)} for \`${code}\``).join(', ')} (an error may name its own: the store fence's time left).`,
              required: waits.length === group.length,
              schema: { type: 'integer', minimum: 0 },
            },
          };
    responses[String(status)] = {
      description: `${group.map(codeLine).join('; ')}.${status === 499 ? ' Never received: the caller hung up; the code names the outcome in the log line and metrics.' : ''}`,
      headers: { 'X-Request-Id': { $ref: `${HEADERS}X-Request-Id` }, ...retryAfter },
      content: { 'application/json': { schema: { allOf: [schemaRef('ErrorBody'), { properties: { error: { properties: { code: { enum: group } } } } }] } } },
    };
  }
  if (codes.includes('PREAUTH_DENIED')) responses['default'] = preauthDenied();
  return responses;
}
