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
import {
  LOCK_LOST,
  RUN_LIMIT,
  SERVER_SHUTDOWN,
  STOP_REASON_TOKEN,
  USER_STOP,
  WEBSOCKET_CLOSE_PREFIX,
  WEBSOCKET_PING_FAILED,
  WEBSOCKET_PONG_TIMEOUT,
  workhorseStopWords,
  type EndReason,
  type InfraStop,
} from '../core/vocabulary';

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
