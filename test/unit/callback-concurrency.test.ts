/**
 * Segment-end callbacks with bounded concurrency (docs/spec.md §6, §7): a drain ends thousands of
 * runs at once, and the owner is sent at most LONGRUN_CALLBACK_CONCURRENCY callbacks at a
 * time over the pooled keep-alive connections; the rest wait their turn, and those still
 * waiting when the drain's budget runs out are given up without being sent.
 */
import { getEventListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { SegmentEnd } from '@longrun/client';
import { OwnerClient } from '../../src/owner/owner-client';
import { Semaphore } from '../../src/core/semaphore';
import { OwnerServiceSimulator } from '../../sandbox/owner-sim';
import { testSecret } from '../../stack/secret';

describe('Semaphore', () => {
  it('grants at most `limit` places, then hands each one given back to the longest waiter', async () => {
    const gate = new Semaphore(2);
    expect(await gate.acquire()).toBe(true);
    expect(await gate.acquire()).toBe(true);
    const order: number[] = [];
    const waiting = [1, 2, 3].map((n) => gate.acquire().then((granted) => (granted ? order.push(n) : undefined)));
    await sleep(5);
    expect({ active: gate.active, waiting: gate.waiting, order }).toEqual({ active: 2, waiting: 3, order: [] });
    gate.release();
    await sleep(0);
    expect(order).toEqual([1]);
    gate.release();
    gate.release();
    await Promise.all(waiting);
    expect(order).toEqual([1, 2, 3]);
    expect(gate.active).toBe(2);
    gate.release();
    gate.release();
    expect(gate.active).toBe(0);
  });

  it('waiters whose signal aborts leave at once, holding nothing; one listener per signal however many wait', async () => {
    const gate = new Semaphore(1);
    await gate.acquire();
    const budget = new AbortController();
    const other = new AbortController();
    const waiters = Array.from({ length: 500 }, () => gate.acquire(budget.signal));
    const unaffected = gate.acquire(other.signal);
    expect(getEventListeners(budget.signal, 'abort')).toHaveLength(1);
    budget.abort();
    expect(await Promise.all(waiters)).toEqual(waiters.map(() => false));
    expect(gate.waiting).toBe(1);
    gate.release();
    expect(await unaffected).toBe(true);
    expect(await gate.acquire(budget.signal)).toBe(false);
  });

  it('a signal whose waiters were all granted keeps no listener', async () => {
    const gate = new Semaphore(1);
    await gate.acquire();
    const signal = new AbortController().signal;
    const waiters = [gate.acquire(signal), gate.acquire(signal)];
    expect(getEventListeners(signal, 'abort')).toHaveLength(1);
    gate.release();
    gate.release();
    expect(await Promise.all(waiters)).toEqual([true, true]);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });
});

describe('OwnerClient.segmentEnd over a bounded number of requests', () => {
  let owner: OwnerServiceSimulator | undefined;
  let client: OwnerClient | undefined;

  afterEach(async () => {
    client?.destroy();
    if (owner) owner.hangSegmentEnds = false;
    await owner?.close();
    owner = undefined;
    client = undefined;
  });

  const body = (i: number): SegmentEnd => ({ workflow_id: String(i), run_id: `run-${i}`, reason: 'drain', segment_duration_s: 1, actions: 0, in_flight: [] });

  async function start(concurrency: number, attempt = { attempts: 3, timeoutMs: 5_000 }): Promise<{ owner: OwnerServiceSimulator; client: OwnerClient }> {
    owner = await OwnerServiceSimulator.start({ secret: testSecret, workflowServiceUri: '127.0.0.1:1' });
    client = new OwnerClient({
      ownerUrl: new URL(owner.url),
      secret: testSecret,
      preauthTimeoutMs: 5_000,
      relayTimeoutMs: 5_000,
      connections: 256,
      callbackAttempts: attempt.attempts,
      callbackTimeoutMs: attempt.timeoutMs,
      callbackConcurrency: concurrency,
      jwtRefreshMs: 30_000,
    });
    return { owner, client };
  }

  it('a hung owner holds at most `callbackConcurrency` callbacks; the rest are given up unsent when the budget aborts', async () => {
    const { owner, client } = await start(8);
    owner.hangSegmentEnds = true;
    const budget = new AbortController();
    const results = Array.from({ length: 60 }, (_, i) => client.segmentEnd(body(i), `req-${i}`, budget.signal));
    await owner.waitFor(() => owner.segmentEndRequests.length === 8, 5_000, 'the first callbacks');
    await sleep(200);
    expect(owner.segmentEndRequests).toHaveLength(8);
    budget.abort();
    expect(await Promise.all(results)).toEqual(results.map(() => 'failed'));
    expect(owner.segmentEndRequests).toHaveLength(8);
  });

  it('every callback is delivered through the bound', async () => {
    const { owner, client } = await start(16);
    const budget = new AbortController();
    const results = await Promise.all(Array.from({ length: 400 }, (_, i) => client.segmentEnd(body(i), `req-${i}`, budget.signal)));
    expect(results.every((r) => r === 'ok')).toBe(true);
    expect(new Set(owner.segmentEnds.map((e) => e.workflow_id)).size).toBe(400);
  });

  it('an attempt the owner does not answer within LONGRUN_CALLBACK_TIMEOUT_MS is given up and retried, then the callback fails', async () => {
    const { owner, client } = await start(4, { attempts: 2, timeoutMs: 300 });
    owner.hangSegmentEnds = true;
    const started = performance.now();
    expect(await client.segmentEnd(body(1), 'req-1', new AbortController().signal)).toBe('failed');
    const elapsed = performance.now() - started;
    // Two attempts of 300 ms and the 100 ms pause between them; generous above for a loaded machine.
    expect(elapsed).toBeGreaterThanOrEqual(600);
    expect(elapsed).toBeLessThan(5_000);
    expect(owner.segmentEndRequests.map((r) => r.path)).toEqual([
      '/api/v4/internal/ai/duo_workflows/workflows/1/segment_end',
      '/api/v4/internal/ai/duo_workflows/workflows/1/segment_end',
    ]);
  });
});
