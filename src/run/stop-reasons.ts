/**
 * What a run sends as StopWorkflowRequest.reason (docs/spec.md §4) for each way longrun stops it,
 * and how that stop is named in teardown metrics, logs and callbacks (§6).
 *
 * The infrastructure reasons are configurable (LONGRUN_STOP_REASON_*): a workflow service
 * whose allowlist does not yet hold WORKHORSE_RUN_LIMIT or WORKHORSE_LOCK_LOST treats them
 * as user stops (it marks the workflow stopped); sending a reason it does allow (e.g.
 * WORKHORSE_SERVER_SHUTDOWN) keeps the workflow resumable until it is updated. The end
 * reason recorded stays what happened (run_limit, lock_lost), whatever word was sent.
 */
import * as grpc from '@grpc/grpc-js';
import {
  STOP_REASON_TOKEN,
  USER_STOP,
  WEBSOCKET_CLOSE_PREFIX,
  WEBSOCKET_PING_FAILED,
  WEBSOCKET_PONG_TIMEOUT,
  infraStopReasons,
  type EndReason,
  type InfraStop,
} from '../vocabulary';

/** A stop: what it is (its end reason) and the word sent to the service. */
export interface StopCause {
  end: EndReason;
  reason: string;
}

export class StopReasons {
  /** Every word reserved for infrastructure stops: the defaults and the configured ones. */
  private readonly reserved: ReadonlySet<string>;

  constructor(private readonly infraReasons: Readonly<Record<InfraStop, string>>) {
    this.reserved = new Set([...infraStopReasons, ...Object.values(infraReasons)]);
  }

  /** longrun's own stop of `kind` (drain, run limit, lost lease). */
  infra(kind: InfraStop): StopCause {
    return { end: kind, reason: this.infraReasons[kind] };
  }

  /** A WebSocket client gone (docs/spec.md §11): its close frame's code, or the liveness check that failed. */
  websocket(kind: 'client_closed' | 'pong_timeout' | 'ping_failed', code = 1000): StopCause {
    if (kind === 'client_closed') return { end: kind, reason: `${WEBSOCKET_CLOSE_PREFIX}${code}` };
    return { end: kind, reason: kind === 'pong_timeout' ? WEBSOCKET_PONG_TIMEOUT : WEBSOCKET_PING_FAILED };
  }

  /** The owner's stop; the stop key's value is sent when it is a plain token and no infrastructure word. */
  user(value: string | null | undefined): StopCause {
    const usable = value && STOP_REASON_TOKEN.test(value) && !this.reserved.has(value);
    return { end: 'stop_requested', reason: usable ? value : USER_STOP };
  }
}

/** The end reason of a call that ended without longrun stopping it. */
export function endReasonForStatus(code: grpc.status): EndReason {
  if (code === grpc.status.OK) return 'finished';
  if (code === grpc.status.UNAVAILABLE) return 'workflow_unavailable';
  return 'stream_error';
}
