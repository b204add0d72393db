/**
 * A start refused by the gateway's store fence (503 LOCK_UNAVAILABLE with `fence`) is waited
 * out by its Retry-After up to storeFenceWaitMs, not the shorter deadlineMs; any other
 * refusal keeps deadlineMs. Without a gateway: the retry loop on a clock that records its
 * waits.
 */
import { describe, expect, it } from 'vitest';
import { LongrunError } from '../src/errors';
import { errorOf } from '../src/responses';
import { defaultRetryOptions, withRetries, type RetryClock } from '../src/retry';

function clock(): { clock: RetryClock; waits: number[] } {
  let now = 0;
  const waits: number[] = [];
  return {
    waits,
    clock: {
      now: () => now,
      random: () => 0,
      sleep: async (ms) => {
        waits.push(ms);
        now += ms;
      },
    },
  };
}

const refusal = (fence: 'new' | 'lost' | undefined, retryAfterS: number): LongrunError =>
  new LongrunError('LOCK_UNAVAILABLE', 'refused', { status: 503, retryable: true, retryAfterS, ...(fence ? { fence } : {}) });

/** An attempt refused `refusals` times, then answered. */
function refusedThen(refusals: number, error: () => LongrunError): { attempt: () => Promise<string>; calls: () => number } {
  let calls = 0;
  return {
    calls: () => calls,
    attempt: async () => {
      calls += 1;
      if (calls <= refusals) throw error();
      return 'accepted';
    },
  };
}

describe('the store fence, waited out', () => {
  it('a fence of 55 s is waited out by its Retry-After though deadlineMs is 30 s (storeFenceWaitMs 75 s by default)', async () => {
    const { clock: time, waits } = clock();
    const { attempt, calls } = refusedThen(1, () => refusal('lost', 55));
    const result = await withRetries(['http://gw'], 0, attempt, defaultRetryOptions, time);
    expect(result).toEqual({ value: 'accepted', attempts: 2, endpoint: 'http://gw' });
    expect(waits).toEqual([55_000]);
    expect(calls()).toBe(2);
  });

  it('past storeFenceWaitMs the refusal is thrown at once, with its fence', async () => {
    const { clock: time, waits } = clock();
    const { attempt } = refusedThen(1, () => refusal('new', 55));
    const error = await withRetries(['http://gw'], 0, attempt, { ...defaultRetryOptions, storeFenceWaitMs: 40_000 }, time).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'LOCK_UNAVAILABLE', fence: 'new', attempts: 1 });
    expect(waits).toEqual([]);
  });

  it('a LOCK_UNAVAILABLE without a fence (Redis unreachable) keeps deadlineMs', async () => {
    const { clock: time, waits } = clock();
    const { attempt } = refusedThen(1, () => refusal(undefined, 55));
    const error = await withRetries(['http://gw'], 0, attempt, defaultRetryOptions, time).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'LOCK_UNAVAILABLE', fence: undefined });
    expect(waits).toEqual([]);
  });

  it('the fence is read from the 503 body; an unknown word there is not a fence, and the body still reads', () => {
    const answer = (fence: string): Parameters<typeof errorOf>[0] => ({
      status: 503,
      headers: { 'retry-after': '42' },
      text: JSON.stringify({ error: { code: 'LOCK_UNAVAILABLE', message: 'm', retryable: true, fence } }),
      endpoint: 'http://gw',
      requestId: 'r',
    });
    expect(errorOf(answer('lost'))).toMatchObject({ code: 'LOCK_UNAVAILABLE', fence: 'lost', retryAfterS: 42 });
    expect(errorOf(answer('melted'))).toMatchObject({ code: 'LOCK_UNAVAILABLE', fence: undefined, retryAfterS: 42 });
  });
});
