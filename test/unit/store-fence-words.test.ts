/**
 * The store fence's refusal in words (docs/spec.md §5): the gateway says why (new, or lost
 * its data) and when to come back, in the 503's message and as the 1013's reason, and
 * @longrun/client reads the reason back — for every fence a lease TTL allows, within the
 * 123 bytes of a close reason, never one kind for the other.
 */
import { describe, expect, it } from 'vitest';
import { fencedStartOf } from '@longrun/client';
import { LockStoreFenced } from '../../src/coordination/backend';
import { storeFences } from '../../src/core/vocabulary';
import { fenced } from '../../src/run/admission';
import { closeForRefusal } from '../../src/websocket/close-codes';

describe('a fenced start, as the gateway words it and the client reads it', () => {
  it.each(storeFences.flatMap((why) => [1, 999, 60_000, 3_600_000].map((ms) => [why, ms] as const)))('%s, %i ms left', (why, remainingMs) => {
    const leaseTtlMs = Math.max(60_000, remainingMs);
    const error = fenced(new LockStoreFenced(remainingMs, why), leaseTtlMs);
    const retryAfterS = Math.max(1, Math.ceil(remainingMs / 1_000));
    expect(error).toMatchObject({ code: 'LOCK_UNAVAILABLE', retryAfterS, fence: why });
    expect(error.toBody().error.fence).toBe(why);
    expect(error.message).toMatch(why === 'new' ? /^the workflow lock store is new / : /^the workflow lock store lost its data /);
    const close = closeForRefusal(error.code, error.message);
    expect(close.code).toBe(1013);
    expect(close.reason).toBe(error.message);
    expect(Buffer.byteLength(close.reason)).toBeLessThanOrEqual(123);
    expect(fencedStartOf(close.code, close.reason)).toEqual({ fence: why, retryAfterS });
  });

  it('other 1013s are not the fence: a lock another session holds is final', () => {
    expect(fencedStartOf(1013, 'Failed to acquire lock on workflow')).toBeUndefined();
    expect(fencedStartOf(1000, 'the workflow lock store is new (no longrun marker): fenced until it is 60 s old, retry in 5 s')).toBeUndefined();
  });
});
