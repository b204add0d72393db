/**
 * The close code a WebSocket session ends with (docs/spec.md §11): the one place a close
 * code is chosen, as Workhorse's runner and handler choose them. A session whose client
 * ended it (a close frame, no pong, a failed ping, a lost connection) is sent nothing: its
 * socket is gone already.
 */
import * as grpc from '@grpc/grpc-js';
import type { ErrorCode } from '../core/errors';
import type { RunResult } from '../run/run';

export interface Close {
  code: number;
  reason: string;
}

/** RFC 6455 bounds a close frame's reason to 123 bytes. */
const MAX_REASON_BYTES = 123;

export const NORMAL: Close = Object.freeze({ code: 1000, reason: '' });
export const SERVER_SHUTDOWN: Close = Object.freeze({ code: 1001, reason: 'server shutdown' });
export const SERVICE_UNAVAILABLE: Close = Object.freeze({ code: 1001, reason: 'duo workflow service unavailable' });
export const QUOTA_EXCEEDED: Close = Object.freeze({ code: 1008, reason: 'Insufficient credits: quota exceeded' });
export const LOCK_HELD: Close = Object.freeze({ code: 1013, reason: 'Failed to acquire lock on workflow' });
/**
 * The store fence refuses the start (the lock store is new, or lost its data moments ago):
 * try again later. The reason is the refusal's own message, which says which and when
 * (admission.ts; @longrun/client reads it).
 */
const LOCK_STORE_FENCED_CODE = 1013;
/**
 * longrun's own 1012s (docs/spec.md §12), both telling the client to reconnect: this replica
 * drains and held only the socket (its run is parked again on its holder: no resume); the
 * run is held by a replica this one cannot reach now (the bridge broke, the holder did not
 * answer, Redis does not say where the run is).
 */
export const SERVICE_RESTART: Close = Object.freeze({ code: 1012, reason: 'service restart' });
export const RUN_UNREACHABLE: Close = Object.freeze({ code: 1012, reason: 'the run is unreachable from this replica: reconnect' });
/** The run lost its lock (Redis lost it, or its lease was not renewed in time): stopped with a word the service allowlists (docs/spec.md §4), resumable — the client reconnects. */
export const LOCK_LOST: Close = Object.freeze({ code: 1012, reason: 'the run lost its lock: reconnect to resume' });
/** Policy violations of longrun's own (Workhorse bounds neither): no start in time, a heartbeat flood. */
export const NO_START: Close = Object.freeze({ code: 1008, reason: 'no startRequest within the start timeout' });
export const HEARTBEAT_FLOOD: Close = Object.freeze({ code: 1008, reason: 'too many heartbeats' });
export const EARLY_FLOOD: Close = Object.freeze({ code: 1008, reason: 'too many events before the run started' });
/** Workhorse's code for a request the workflow service refused as invalid. */
export const INVALID_REQUEST_CODE = 4400;

/** `text` cut to 123 bytes, then back to the last whole UTF-8 character. */
export function closeReason(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= MAX_REASON_BYTES) return text;
  let end = MAX_REASON_BYTES;
  // A continuation byte (10xxxxxx) at the cut means a character was split: step back to its start.
  while (end > 0 && ((bytes[end] as number) & 0xc0) === 0x80) end -= 1;
  return bytes.subarray(0, end).toString('utf8');
}

export function invalidRequest(message: string): Close {
  return { code: INVALID_REQUEST_CODE, reason: closeReason(message) };
}

/** How a session whose run ended is closed; undefined when its client ended it. */
export function closeForRunEnd(result: RunResult): Close | undefined {
  switch (result.reason) {
    case 'client_closed':
    case 'pong_timeout':
    case 'ping_failed':
    case 'client_gone':
      return undefined;
    case 'drain':
      return SERVER_SHUTDOWN;
    case 'lock_lost':
      return LOCK_LOST;
    case 'workflow_unavailable':
      return SERVICE_UNAVAILABLE;
    default:
      break;
  }
  const { code, details } = result.end;
  // grpc-js's `details` is the status message itself (its ServiceError.message prefixes the code).
  if (code === grpc.status.INVALID_ARGUMENT) return invalidRequest(details);
  if (code === grpc.status.RESOURCE_EXHAUSTED && details.includes('USAGE_QUOTA_EXCEEDED')) return QUOTA_EXCEEDED;
  return NORMAL;
}

/** How a session whose start was refused before its run opened is closed. */
export function closeForRefusal(code: ErrorCode, message: string): Close {
  switch (code) {
    case 'WORKFLOW_LOCKED':
      return LOCK_HELD;
    case 'LOCK_UNAVAILABLE':
      return { code: LOCK_STORE_FENCED_CODE, reason: closeReason(message) };
    case 'DRAINING':
      return SERVER_SHUTDOWN;
    case 'WORKFLOW_SERVICE_UNAVAILABLE':
      return SERVICE_UNAVAILABLE;
    case 'INVALID_REQUEST':
      return invalidRequest(message);
    case 'USAGE_QUOTA_EXCEEDED':
      return QUOTA_EXCEEDED;
    default:
      return NORMAL;
  }
}
