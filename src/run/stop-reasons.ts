/**
 * What a run sends as StopWorkflowRequest.reason (docs/spec.md §4) for each way longrun stops it,
 * the status the workflow service acknowledges that word with, and how the stop is named
 * in teardown metrics, logs and callbacks (§6).
 *
 * The real service (ai-gateway `server.py`) keeps a workflow `running` only for a word on
 * its infrastructure allowlist (LONGRUN_WORKFLOW_INFRA_STOP_REASONS says what the
 * operator's service holds; the public one has WORKHORSE_SERVER_SHUTDOWN and
 * WORKHORSE_WEBSOCKET_PING_FAILED). So the run limit and a lost lease send their own
 * words only to a service that allowlists them, and WORKHORSE_SERVER_SHUTDOWN otherwise:
 * they never mark a workflow stopped. The end reason recorded stays what happened
 * (run_limit, lock_lost), whatever word was sent.
 *
 * The service ends the call UNAVAILABLE for WORKHORSE_SERVER_SHUTDOWN and OK for every
 * other stop, allowlisted or not: that status is the stop's acknowledgement.
 */
import * as grpc from '@grpc/grpc-js';
import type { EndReason } from '../core/vocabulary';
import type { CoordinationStop } from '../coordination/run-coordination';

/**
 * StopWorkflowRequest.reason values longrun sends for its own stops (docs/spec.md §4).
 * WORKHORSE_SERVER_SHUTDOWN is on every workflow service's infrastructure allowlist and is
 * the one word the service acknowledges with UNAVAILABLE ("retry on another pod");
 * WORKHORSE_RUN_LIMIT and WORKHORSE_LOCK_LOST are sent only to a service that allowlists
 * them (LONGRUN_WORKFLOW_INFRA_STOP_REASONS), else a run limit or a lost lease would mark
 * the workflow stopped.
 */
export const SERVER_SHUTDOWN = 'WORKHORSE_SERVER_SHUTDOWN';
const RUN_LIMIT = 'WORKHORSE_RUN_LIMIT';
const LOCK_LOST = 'WORKHORSE_LOCK_LOST';
/** The user reason when the owner's stop names none (or an unusable one). */
export const USER_STOP = 'USER_STOP';
/**
 * What Workhorse sends when a WebSocket client goes away. The public service allowlists
 * PING_FAILED only: a PONG_TIMEOUT is a user stop there, for Workhorse as for longrun.
 */
const WEBSOCKET_PONG_TIMEOUT = 'WORKHORSE_WEBSOCKET_PONG_TIMEOUT';
const WEBSOCKET_PING_FAILED = 'WORKHORSE_WEBSOCKET_PING_FAILED';
/** A client's close frame: WORKHORSE_WEBSOCKET_CLOSE_<code>. */
const WEBSOCKET_CLOSE_PREFIX = 'WORKHORSE_WEBSOCKET_CLOSE_';
/**
 * The public workflow service's infrastructure allowlist (ai-gateway
 * `duo_workflow_service/workflows/type_definitions.py` INFRA_STOP_REASONS): a stop with
 * one of these leaves the workflow `running`; any other word marks it stopped. The
 * default of LONGRUN_WORKFLOW_INFRA_STOP_REASONS.
 */
export const publicInfraStopReasons = [SERVER_SHUTDOWN, WEBSOCKET_PING_FAILED] as const;
/** Every word Workhorse or longrun stops with for an infrastructure cause: never the owner's reason. */
const workhorseStopWords = [SERVER_SHUTDOWN, RUN_LIMIT, LOCK_LOST, WEBSOCKET_PONG_TIMEOUT, WEBSOCKET_PING_FAILED] as const;
/** The stops longrun makes itself, each sent with the most specific word the service allowlists. */
type InfraStop = Extract<EndReason, 'drain' | 'run_limit' | 'lock_lost'>;

/** What a stop reason token may look like (the stop key's value, the stop endpoint's body). */
export const STOP_REASON_TOKEN = /^[A-Z][A-Z0-9_]{0,63}$/;

/**
 * Every way a run is stopped, the one argument of `Run.stop` (src/run/run.ts): the
 * handshake stops (run limit, drain, lost lease, the owner's stop key) and the cancels
 * without one (the caller gone, the service never took the stream). Whoever decides a
 * run must end — the run limits, the drain, the lease keeper through the run's
 * coordination, the stop watcher, the stop check before an action, the caller's
 * adapter — says so with one of these. The coordination's two (a lost lease, the owner's
 * stop key) are written where it makes them (CoordinationStop).
 */
export type StopReason =
  | { readonly kind: 'run_limit' }
  | { readonly kind: 'drain'; readonly ackTimeoutMs?: number }
  | CoordinationStop
  | { readonly kind: 'client_closed'; readonly code: number }
  | { readonly kind: 'pong_timeout' }
  | { readonly kind: 'ping_failed' }
  | { readonly kind: 'client_gone' }
  | { readonly kind: 'workflow_unavailable' };

/** The stops that carry nothing but their kind, made once (one object each, no allocation per stop). */
export const STOPS = Object.freeze({
  run_limit: Object.freeze({ kind: 'run_limit' }),
  client_gone: Object.freeze({ kind: 'client_gone' }),
  workflow_unavailable: Object.freeze({ kind: 'workflow_unavailable' }),
  pong_timeout: Object.freeze({ kind: 'pong_timeout' }),
  ping_failed: Object.freeze({ kind: 'ping_failed' }),
} satisfies Record<string, StopReason>);

/** A stop: what it is (its end reason), the word sent to the service, and the status that acknowledges it. */
export interface StopCause {
  end: EndReason;
  reason: string;
  ack: grpc.status;
}

/** The status the workflow service ends the call with when it acted on a stop of `word`. */
export function ackFor(word: string): grpc.status {
  return word === SERVER_SHUTDOWN ? grpc.status.UNAVAILABLE : grpc.status.OK;
}

function cause(end: EndReason, reason: string): StopCause {
  return { end, reason, ack: ackFor(reason) };
}

export class StopReasons {
  /** The word each of longrun's own stops is sent with. */
  readonly infraWords: Readonly<Record<InfraStop, string>>;
  /** Every word reserved for infrastructure stops: Workhorse's and the service's allowlist. */
  private readonly reserved: ReadonlySet<string>;

  /** `allowlist`: what the workflow service treats as infrastructure stops (it always has WORKHORSE_SERVER_SHUTDOWN). */
  constructor(allowlist: readonly string[]) {
    const allowed = new Set(allowlist);
    this.infraWords = Object.freeze({
      drain: SERVER_SHUTDOWN,
      run_limit: allowed.has(RUN_LIMIT) ? RUN_LIMIT : SERVER_SHUTDOWN,
      lock_lost: allowed.has(LOCK_LOST) ? LOCK_LOST : SERVER_SHUTDOWN,
    });
    this.reserved = new Set([...workhorseStopWords, ...allowlist]);
  }

  /** longrun's own stop of `kind` (drain, run limit, lost lease). */
  infra(kind: InfraStop): StopCause {
    return cause(kind, this.infraWords[kind]);
  }

  /** A WebSocket client gone (docs/spec.md §11): its close frame's code, or the liveness check that failed. */
  websocket(kind: 'client_closed' | 'pong_timeout' | 'ping_failed', code = 1000): StopCause {
    if (kind === 'client_closed') return cause(kind, `${WEBSOCKET_CLOSE_PREFIX}${code}`);
    return cause(kind, kind === 'pong_timeout' ? WEBSOCKET_PONG_TIMEOUT : WEBSOCKET_PING_FAILED);
  }

  /** The owner's stop; the stop key's value is sent when it is a plain token and no infrastructure word. */
  user(value: string | null | undefined): StopCause {
    const usable = value && STOP_REASON_TOKEN.test(value) && !this.reserved.has(value);
    return cause('stop_requested', usable ? value : USER_STOP);
  }
}

/** The end reason of a call that ended without longrun stopping it. */
export function endReasonForStatus(code: grpc.status): EndReason {
  if (code === grpc.status.OK) return 'finished';
  if (code === grpc.status.UNAVAILABLE) return 'workflow_unavailable';
  return 'stream_error';
}
