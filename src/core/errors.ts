/**
 * Every error a caller can see, by its stable code: whether retrying can help, and what
 * it is counted as. Nothing here knows HTTP: src/http/error-status.ts gives each code its
 * status (docs/spec.md §3 status table) and src/http/error-response.ts is the one place
 * that turns an error into a response. docs/errors.md lists every code (a test checks).
 */

import type { GatewayErrorCode } from '@longrun/client';
import type { Within } from './type-proof';
import type { StoreFence } from './vocabulary';

/** Why an execute was refused before a run started; each error code maps to one (errorCatalog). */
export const connectionErrorTypes = ['preauth', 'bad_request', 'lock', 'capacity', 'stream_open', 'rejected', 'client_gone', 'internal'] as const;
export type ConnectionErrorType = (typeof connectionErrorTypes)[number];

export interface ErrorSpec {
  retryable: boolean;
  /** The `error_type` an execute refused with this code is counted under (connection errors). */
  errorType: ConnectionErrorType;
  /**
   * Seconds a caller should wait before trying again (Retry-After over HTTP), for the codes
   * that ask it to come back; an error may name its own instead (the store fence's time left).
   */
  retryAfterS?: number;
}

export const errorCatalog = {
  INVALID_REQUEST: { retryable: false, errorType: 'bad_request' },
  UNAUTHORIZED: { retryable: false, errorType: 'internal' },
  PREAUTH_DENIED: { retryable: false, errorType: 'preauth' },
  USAGE_QUOTA_EXCEEDED: { retryable: false, errorType: 'rejected' },
  NOT_FOUND: { retryable: false, errorType: 'internal' },
  FORBIDDEN_ORIGIN: { retryable: false, errorType: 'bad_request' },
  // Long enough for a run whose 202 was lost to be seen in flight, short against a lease.
  WORKFLOW_LOCKED: { retryable: true, errorType: 'lock', retryAfterS: 5 },
  STOPPED: { retryable: false, errorType: 'rejected' },
  NOT_CANCELLABLE: { retryable: false, errorType: 'internal' },
  // An actor's runs end in minutes, not seconds: a dispatcher's deadline gives up and its queue reschedules.
  ACTOR_LIMIT: { retryable: true, errorType: 'capacity', retryAfterS: 30 },
  CLIENT_GONE: { retryable: true, errorType: 'client_gone' },
  INTERNAL: { retryable: true, errorType: 'internal' },
  OWNER_UNAVAILABLE: { retryable: true, errorType: 'preauth' },
  PREAUTH_INVALID: { retryable: true, errorType: 'preauth' },
  WORKFLOW_SERVICE_UNAVAILABLE: { retryable: true, errorType: 'stream_open' },
  // Redis unreachable: a reconnect or a failover takes seconds (under the store fence, its time left instead).
  LOCK_UNAVAILABLE: { retryable: true, errorType: 'lock', retryAfterS: 2 },
  // Another replica takes it at once: the load balancer has already moved on.
  DRAINING: { retryable: true, errorType: 'capacity', retryAfterS: 1 },
  // A full replica frees slots as runs end, and the autoscaler adds pods within a minute.
  CAPACITY_EXHAUSTED: { retryable: true, errorType: 'capacity', retryAfterS: 5 },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof errorCatalog;

/** The client package reads exactly these codes (type-proof.ts): neither side can add one alone. */
export type ClientErrorCodesProof = [Within<ErrorCode, GatewayErrorCode>, Within<GatewayErrorCode, ErrorCode>];

export interface GatewayErrorOptions {
  cause?: unknown;
  /** How long a retry should wait (Retry-After over HTTP). */
  retryAfterS?: number;
  /** The run this error ended, when one had been opened (for the request's log line). */
  runId?: string;
  /** LOCK_UNAVAILABLE from the store fence: why it is up (the body's `fence`, docs/spec.md §5). */
  fence?: StoreFence;
}

export class GatewayError extends Error {
  readonly retryable: boolean;
  readonly retryAfterS: number | undefined;
  readonly errorType: ConnectionErrorType;
  readonly runId: string | undefined;
  readonly fence: StoreFence | undefined;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: GatewayErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    const spec: ErrorSpec = errorCatalog[code];
    this.retryable = spec.retryable;
    this.retryAfterS = options.retryAfterS ?? spec.retryAfterS;
    this.errorType = spec.errorType;
    this.runId = options.runId;
    this.fence = options.fence;
  }

  toBody(): { error: { code: ErrorCode; message: string; retryable: boolean; fence?: StoreFence } } {
    return { error: { code: this.code, message: this.message, retryable: this.retryable, ...(this.fence ? { fence: this.fence } : {}) } };
  }
}

/** Any thrown value as a GatewayError; an unexpected one becomes INTERNAL with no detail. */
export function toGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  return new GatewayError('INTERNAL', 'internal error', { cause: err });
}
