/**
 * Stop reasons (StopWorkflowRequest.reason, SPEC §4) and how a run's end is named in
 * teardown metrics and segment-end callbacks (§6).
 */
import * as grpc from '@grpc/grpc-js';
import type { TeardownReason } from '../metrics';

export const SERVER_SHUTDOWN = 'WORKHORSE_SERVER_SHUTDOWN';
export const RUN_LIMIT = 'WORKHORSE_RUN_LIMIT';
export const LOCK_LOST = 'WORKHORSE_LOCK_LOST';
export const USER_STOP = 'USER_STOP';

export const infraStopReasons = [SERVER_SHUTDOWN, RUN_LIMIT, LOCK_LOST] as const;

/** A stop key's value is sent as the reason only when it is a plain reason token. */
export function userStopReason(value: string | null | undefined): string {
  if (value && /^[A-Z][A-Z0-9_]{0,63}$/.test(value) && !(infraStopReasons as readonly string[]).includes(value)) {
    return value;
  }
  return USER_STOP;
}

/** The teardown reason for a run that longrun stopped with `stopReason`. */
export function teardownForStop(stopReason: string): TeardownReason {
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

/** The teardown reason for a call that ended without longrun stopping it. */
export function teardownForEnd(code: grpc.status): TeardownReason {
  if (code === grpc.status.OK) return 'finished';
  if (code === grpc.status.UNAVAILABLE) return 'workflow_unavailable';
  return 'stream_error';
}
