/**
 * The HTTP status of every error code (docs/spec.md §3 status table): the one place a
 * status is chosen for an error. error-response.ts writes it; docs/errors.md lists it.
 */
import { errorCatalog, type ErrorCode, type ErrorSpec } from '../core/errors';

export const errorStatus = {
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  // The owner's own status is passed through (execute-route.ts); 403 is the code's when it is not.
  PREAUTH_DENIED: 403,
  USAGE_QUOTA_EXCEEDED: 403,
  NOT_FOUND: 404,
  // A browser page of another site opening a WebSocket session (cross-site WebSocket hijacking).
  FORBIDDEN_ORIGIN: 403,
  WORKFLOW_LOCKED: 409,
  STOPPED: 409,
  NOT_CANCELLABLE: 409,
  ACTOR_LIMIT: 429,
  // nginx's "client closed request": nobody reads it, but the log line and metrics say what happened.
  CLIENT_GONE: 499,
  INTERNAL: 500,
  OWNER_UNAVAILABLE: 502,
  PREAUTH_INVALID: 502,
  WORKFLOW_SERVICE_UNAVAILABLE: 502,
  LOCK_UNAVAILABLE: 503,
  DRAINING: 503,
  CAPACITY_EXHAUSTED: 503,
} as const satisfies Record<ErrorCode, number>;

/** Retry-After, in seconds: the error's own (its code's, errorCatalog), and 1 on every 503 that names none. */
export function retryAfterOf(code: ErrorCode, retryAfterS: number | undefined): number | undefined {
  const spec: ErrorSpec = errorCatalog[code];
  return retryAfterS ?? spec.retryAfterS ?? (errorStatus[code] === 503 ? 1 : undefined);
}
