/**
 * The per-request abort signal of owner calls: parent abort, timeout, disposal, and one
 * listener on a parent shared by many requests.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { deadline } from '../../src/core/deadline';

describe('deadline', () => {
  it('aborts when the parent aborts, with the parent reason, and not as a timeout', () => {
    const parent = new AbortController();
    const limit = deadline(parent.signal, 10_000);
    parent.abort(new Error('run ended'));
    expect(limit.signal.aborted).toBe(true);
    expect((limit.signal.reason as Error).message).toBe('run ended');
    expect(limit.timedOut).toBe(false);
    limit.dispose();
  });

  it('starts aborted under an aborted parent', () => {
    const parent = new AbortController();
    parent.abort();
    expect(deadline(parent.signal, 10_000).signal.aborted).toBe(true);
  });

  it('aborts after the timeout with a TimeoutError and says so', async () => {
    const limit = deadline(undefined, 20);
    await sleep(60);
    expect(limit.signal.aborted).toBe(true);
    expect(limit.timedOut).toBe(true);
    expect((limit.signal.reason as DOMException).name).toBe('TimeoutError');
  });

  it('once disposed, neither the timer nor the parent aborts it', async () => {
    const parent = new AbortController();
    const limit = deadline(parent.signal, 20);
    limit.dispose();
    await sleep(60);
    parent.abort();
    expect(limit.signal.aborted).toBe(false);
  });

  it('puts one listener on a parent shared by many requests, and aborts them all', () => {
    const parent = new AbortController();
    const limits = Array.from({ length: 1_000 }, () => deadline(parent.signal, 10_000));
    expect(getEventListeners(parent.signal, 'abort')).toHaveLength(1);
    limits.slice(0, 500).forEach((limit) => limit.dispose());
    parent.abort();
    expect(limits.filter((limit) => limit.signal.aborted)).toHaveLength(500);
    limits.forEach((limit) => limit.dispose());
  });
});
