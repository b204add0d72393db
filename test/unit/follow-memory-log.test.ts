/**
 * The follow log of a gateway without Redis (src/follow/memory-log.ts): a workflow's log lives one
 * TTL past its making or its last touch, and then goes, whether or not anything comes back for
 * it (issue [26]: a log outlived its followers, and nothing swept it once the follow's own timer stopped).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryFollowLog } from '../../src/follow/memory-log';

beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
afterEach(() => vi.useRealTimers());

describe('the memory follow log', () => {
  it('a log nobody touches goes one TTL later, and its sweep timer with it', async () => {
    const log = new MemoryFollowLog({ ttlMs: 10_000, backlog: 100 });
    await log.append('9001', [{ kind: 'checkpoint', data: '{}' }], 'open');
    await log.append('9002', [{ kind: 'checkpoint', data: '{}' }], 'open');
    expect(log.size).toBe(2);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(5_000);
    log.touch(['9002']);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(log.size).toBe(1);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(log.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    await log.close();
  });
});
