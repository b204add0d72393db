/**
 * Every error a caller can see, by its stable code: whether retrying can help, and what
 * it is counted as. Nothing here knows HTTP: src/http/error-status.ts gives each code its
 * status (docs/spec.md §3 status table) and src/http/error-response.ts is the one place
 * that turns an error into a response. docs/errors.md lists every code (a test checks).
 */

import type { ConnectionErrorType } from './vocabulary';

interface ErrorSpec {
  retryable: boolean;
  /** The `error_type` an execute refused with this code is counted under (connection errors). */
  errorType: ConnectionErrorType;
}

export const errorCatalog = {
  INVALID_REQUEST: { retryable: false, errorType: 'bad_request' },
  UNAUTHORIZED: { retryable: false, errorType: 'internal' },
  PREAUTH_DENIED: { retryable: false, errorType: 'preauth' },
  USAGE_QUOTA_EXCEEDED: { retryable: false, errorType: 'rejected' },
  NOT_FOUND: { retryable: false, errorType: 'internal' },
  FORBIDDEN_ORIGIN: { retryable: false, errorType: 'bad_request' },
  WORKFLOW_LOCKED: { retryable: true, errorType: 'lock' },
  STOPPED: { retryable: false, errorType: 'rejected' },
  NOT_CANCELLABLE: { retryable: false, errorType: 'internal' },
  ACTOR_LIMIT: { retryable: true, errorType: 'capacity' },
  CLIENT_GONE: { retryable: true, errorType: 'client_gone' },
  INTERNAL: { retryable: true, errorType: 'internal' },
  OWNER_UNAVAILABLE: { retryable: true, errorType: 'preauth' },
  PREAUTH_INVALID: { retryable: true, errorType: 'preauth' },
  WORKFLOW_SERVICE_UNAVAILABLE: { retryable: true, errorType: 'stream_open' },
  LOCK_UNAVAILABLE: { retryable: true, errorType: 'lock' },
  DRAINING: { retryable: true, errorType: 'capacity' },
  CAPACITY_EXHAUSTED: { retryable: true, errorType: 'capacity' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof errorCatalog;

export interface GatewayErrorOptions {
  cause?: unknown;
  /** How long a retry should wait (Retry-After over HTTP). */
  retryAfterS?: number;
  /** The run this error ended, when one had been opened (for the request's log line). */
  runId?: string;
}

export class GatewayError extends Error {
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
    this.retryable = spec.retryable;
    this.retryAfterS = options.retryAfterS;
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
