/**
 * How stop reasons (StopWorkflowRequest.reason, SPEC §4) and call endings become a run's
 * end reason (the teardown word of metrics, logs and segment-end callbacks, §6).
 */
import * as grpc from '@grpc/grpc-js';
import { LOCK_LOST, RUN_LIMIT, SERVER_SHUTDOWN, STOP_REASON_TOKEN, USER_STOP, infraStopReasons, type EndReason } from '../vocabulary';

/** A stop key's value is sent as the reason only when it is a plain reason token. */
export function userStopReason(value: string | null | undefined): string {
  if (value && STOP_REASON_TOKEN.test(value) && !(infraStopReasons as readonly string[]).includes(value)) return value;
  return USER_STOP;
}

/** The end reason of a run that longrun stopped with `stopReason`. */
export function endReasonForStop(stopReason: string): EndReason {
  switch (stopReason) {
    case SERVER_SHUTDOWN:
      return 'drain';
    case RUN_LIMIT:
      return 'run_limit';
    case LOCK_LOST:
      return 'lock_lost';
    default:
      return 'stop_requested';
  }
}

/** The end reason of a call that ended without longrun stopping it. */
export function endReasonForStatus(code: grpc.status): EndReason {
  if (code === grpc.status.OK) return 'finished';
  if (code === grpc.status.UNAVAILABLE) return 'workflow_unavailable';
  return 'stream_error';
}
