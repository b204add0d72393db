/**
 * Every error a caller can see, with its stable code and HTTP status (SPEC §3 status
 * table). Routes throw or return a GatewayError; src/http/error-response.ts is the one
 * place that turns it into a response. docs/errors.md lists every code (a test checks).
 */

import type { ConnectionErrorType } from './vocabulary';

interface ErrorSpec {
  status: number;
  retryable: boolean;
  /** The `error_type` an execute refused with this code is counted under (connection errors). */
  errorType: ConnectionErrorType;
}

export const errorCatalog = {
  INVALID_REQUEST: { status: 400, retryable: false, errorType: 'bad_request' },
  UNAUTHORIZED: { status: 401, retryable: false, errorType: 'internal' },
  // The owner's own status is passed through; 403 is only the catalogue's placeholder.
  PREAUTH_DENIED: { status: 403, retryable: false, errorType: 'preauth' },
  USAGE_QUOTA_EXCEEDED: { status: 403, retryable: false, errorType: 'rejected' },
  NOT_FOUND: { status: 404, retryable: false, errorType: 'internal' },
  WORKFLOW_LOCKED: { status: 409, retryable: true, errorType: 'lock' },
  STOPPED: { status: 409, retryable: false, errorType: 'rejected' },
  NOT_CANCELLABLE: { status: 409, retryable: false, errorType: 'internal' },
  ACTOR_LIMIT: { status: 429, retryable: true, errorType: 'capacity' },
  // nginx's "client closed request": nobody reads it, but the log line and metrics say what happened.
  CLIENT_GONE: { status: 499, retryable: true, errorType: 'client_gone' },
  INTERNAL: { status: 500, retryable: true, errorType: 'internal' },
  OWNER_UNAVAILABLE: { status: 502, retryable: true, errorType: 'preauth' },
  PREAUTH_INVALID: { status: 502, retryable: true, errorType: 'preauth' },
  WORKFLOW_SERVICE_UNAVAILABLE: { status: 502, retryable: true, errorType: 'stream_open' },
  LOCK_UNAVAILABLE: { status: 503, retryable: true, errorType: 'lock' },
  DRAINING: { status: 503, retryable: true, errorType: 'capacity' },
  CAPACITY_EXHAUSTED: { status: 503, retryable: true, errorType: 'capacity' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof errorCatalog;

export interface GatewayErrorOptions {
  cause?: unknown;
  /** Seconds for Retry-After (always sent with a 503). */
  retryAfterS?: number;
  /** Overrides the catalogue status (PREAUTH_DENIED passes the owner's through). */
  status?: number;
  /** The run this error ended, when one had been opened (for the request's log line). */
  runId?: string;
}

export class GatewayError extends Error {
  readonly status: number;
  readonly retryable: boolean;
  readonly retryAfterS: number | undefined;
  readonly errorType: ConnectionErrorType;
  readonly runId: string | undefined;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: GatewayErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    const spec: ErrorSpec = errorCatalog[code];
    this.status = options.status ?? spec.status;
    this.retryable = spec.retryable;
    this.retryAfterS = options.retryAfterS ?? (this.status === 503 ? 1 : undefined);
    this.errorType = spec.errorType;
    this.runId = options.runId;
  }

  toBody(): { error: { code: ErrorCode; message: string; retryable: boolean } } {
    return { error: { code: this.code, message: this.message, retryable: this.retryable } };
  }
}

/** Any thrown value as a GatewayError; an unexpected one becomes INTERNAL with no detail. */
export function toGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  return new GatewayError('INTERNAL', 'internal error', { cause: err });
}
