/**
 * The one error type of the client: every refusal the gateway answers (docs/spec.md §3 status
 * table, docs/errors.md) and every failure on the way to it, with the stable `code`, the
 * HTTP `status`, whether a retry may succeed, the gateway's `Retry-After` and the request
 * id that joins the call to the gateway's and the owner's logs.
 */
/**
 * The codes the gateway answers with (docs/errors.md), in its body `{"error": {"code", "message",
 * "retryable"}}`. The gateway's src/core/errors.ts is checked by its compiler to list exactly these.
 */
export type GatewayErrorCode =
  | 'INVALID_REQUEST'
  | 'UNAUTHORIZED'
  | 'PREAUTH_DENIED'
  | 'USAGE_QUOTA_EXCEEDED'
  | 'NOT_FOUND'
  | 'FORBIDDEN_ORIGIN'
  | 'WORKFLOW_LOCKED'
  | 'STOPPED'
  | 'NOT_CANCELLABLE'
  | 'ACTOR_LIMIT'
  | 'CLIENT_GONE'
  | 'INTERNAL'
  | 'OWNER_UNAVAILABLE'
  | 'PREAUTH_INVALID'
  | 'WORKFLOW_SERVICE_UNAVAILABLE'
  | 'LOCK_UNAVAILABLE'
  | 'DRAINING'
  | 'CAPACITY_EXHAUSTED';

import type { StoreFence } from './vocabulary';

/**
 * Codes the client adds to the gateway's: `NETWORK_ERROR` (no answer: refused,
 * reset, timed out), `UNEXPECTED_RESPONSE` (an answer that is not the gateway's, e.g. a
 * proxy's 502 page, or a body the client cannot read).
 */
export const clientErrorCodes = ['NETWORK_ERROR', 'UNEXPECTED_RESPONSE'] as const;
export type ClientErrorCode = (typeof clientErrorCodes)[number];
/** Every code a LongrunError may carry; a newer gateway may send a code not listed here. */
export type LongrunErrorCode = GatewayErrorCode | ClientErrorCode;

export interface LongrunErrorInit {
  status?: number | undefined;
  retryable: boolean;
  retryAfterS?: number | undefined;
  requestId?: string | undefined;
  /** The gateway base URL that answered (or failed to). */
  endpoint?: string | undefined;
  /** The owner's own body (PREAUTH_DENIED), or the unreadable answer (UNEXPECTED_RESPONSE); at most 32 KiB. */
  body?: string | undefined;
  /** LOCK_UNAVAILABLE from the gateway's store fence: why it is up (the body's `fence`). */
  fence?: StoreFence | undefined;
  cause?: unknown;
}

export class LongrunError extends Error {
  readonly code: LongrunErrorCode | (string & {});
  /** HTTP status; undefined for NETWORK_ERROR. */
  readonly status: number | undefined;
  /** A later attempt may succeed (the gateway's `retryable`, or the client's judgement for its own codes). */
  readonly retryable: boolean;
  /** Seconds from the answer's Retry-After header. */
  readonly retryAfterS: number | undefined;
  readonly requestId: string | undefined;
  readonly endpoint: string | undefined;
  readonly body: string | undefined;
  /**
   * A start the gateway's store fence refused (503 LOCK_UNAVAILABLE): `new`, a Redis new to
   * longrun and not a lease TTL old yet; `lost`, one that lost its data (a restart, a
   * failover). It lasts at most one lease TTL; the client waits it out (RetryOptions.storeFenceWaitMs).
   */
  readonly fence: StoreFence | undefined;
  /** Attempts made before this error was given up on (1 when not retried). */
  attempts = 1;

  constructor(code: LongrunErrorCode | (string & {}), message: string, init: LongrunErrorInit) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'LongrunError';
    this.code = code;
    this.status = init.status;
    this.retryable = init.retryable;
    this.retryAfterS = init.retryAfterS;
    this.requestId = init.requestId;
    this.endpoint = init.endpoint;
    this.body = init.body;
    this.fence = init.fence;
  }
}

/** The abort reason of `signal`, as thrown by fetch and undici. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}
