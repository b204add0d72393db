/**
 * The gateway's store fence as a WebSocket session meets it (docs/spec.md §5, §11): a start
 * the fence refuses is closed 1013 with a reason that says why and when to come back —
 *
 *   the workflow lock store is new (no longrun marker): fenced until it is 60 s old, retry in 42 s
 *   the workflow lock store lost its data (a restart, a failover or a flush): fenced, retry in 42 s
 *
 * — where a 1013 for a lock another session holds (`Failed to acquire lock on workflow`) is
 * final. Over HTTP the same refusal is a 503 whose body carries `fence` (responses.ts).
 */
import type { StoreFence } from './vocabulary';

/** A start the store fence refused. */
export interface FencedStart {
  fence: StoreFence;
  /** When the gateway said to try again. */
  retryAfterS: number;
}

/** The close code of a start that may be tried again later (RFC 6455 "Try Again Later"). */
export const STORE_FENCE_CLOSE_CODE = 1013;

const FENCE_REASON = /^the workflow lock store (is new|lost its data)\b.*\bretry in (\d+) s$/;

/** The store fence a close stands for, or undefined when it is any other close. */
export function fencedStartOf(code: number, reason: string): FencedStart | undefined {
  if (code !== STORE_FENCE_CLOSE_CODE) return undefined;
  const match = FENCE_REASON.exec(reason);
  if (!match) return undefined;
  return { fence: match[1] === 'is new' ? 'new' : 'lost', retryAfterS: Number(match[2]) };
}
