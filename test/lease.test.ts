/**
 * Lease on its own (SPEC §5), against a fake store and a fake clock: renewals every
 * TTL/3, a lost token, the stop flag, a store that errors or hangs (the run is told the
 * lease is lost before it can expire), and release.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { LeaseRefresh, RenewResult } from '../src/coordination/backend';
import { Lease, type LeaseBackend, type LeaseHooks } from '../src/coordination/lease';

const TTL = 300;

/** A store whose renewal answers are chosen by the test, one at a time. */
class FakeStore implements LeaseBackend {
  readonly renewals: Array<{ at: number; refresh: LeaseRefresh }> = [];
  readonly releases: Array<{ runId: string; actor: unknown }> = [];
  answer: () => Promise<RenewResult> = () => Promise.resolve({ owned: true, stop: null });
  releaseFails = false;

  renew(_workflowId: string, _token: string, _ttlMs: number, refresh: LeaseRefresh): Promise<RenewResult> {
    this.renewals.push({ at: Date.now(), refresh });
    return this.answer();
  }

  async release(_workflowId: string, _token: string, runId: string, actor?: unknown): Promise<void> {
    this.releases.push({ runId, actor });
    if (this.releaseFails) throw new Error('store down');
  }
}

interface Seen {
  lost: Array<{ why: string; at: number }>;
  stops: string[];
  renews: string[];
}

function hooks(seen: Seen): LeaseHooks {
  return {
    onLost: (why) => seen.lost.push({ why, at: Date.now() }),
    onStop: (value) => seen.stops.push(value),
    onRenew: (result) => seen.renews.push(result),
    refresh: () => ({ runId: 'run-1', state: 'running', lastActionAt: '' }),
  };
}

let store: FakeStore;
let seen: Seen;
let lease: Lease | undefined;

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
  store = new FakeStore();
  seen = { lost: [], stops: [], renews: [] };
});

afterEach(async () => {
  await lease?.release('run-1');
  lease = undefined;
  vi.useRealTimers();
});

function hold(actor?: { actorId: string; member: string }): Lease {
  lease = new Lease(store, 'w', 'token', TTL, hooks(seen), Date.now(), actor);
  return lease;
}

describe('Lease', () => {
  it('renews every TTL/3 while the token holds, refreshing the run record and the actor slot', async () => {
    const acquiredAt = Date.now();
    hold({ actorId: 'u', member: 'token' });
    await vi.advanceTimersByTimeAsync(TTL * 2);
    expect(store.renewals.map((r) => r.at - acquiredAt)).toEqual([100, 200, 300, 400, 500, 600]);
    expect(store.renewals[0]?.refresh).toEqual({ runId: 'run-1', state: 'running', lastActionAt: '', actor: { actorId: 'u', member: 'token' } });
    expect(seen.renews).toEqual(['ok', 'ok', 'ok', 'ok', 'ok', 'ok']);
    expect(seen.lost).toEqual([]);
  });

  it('a renewal that finds the token gone reports it taken, once, and renews no more', async () => {
    hold();
    store.answer = () => Promise.resolve({ owned: false, stop: null });
    await vi.advanceTimersByTimeAsync(TTL * 3);
    expect(seen.lost.map((l) => l.why)).toEqual(['taken']);
    expect(store.renewals).toHaveLength(1);
  });

  it('passes the stop flag on and keeps renewing', async () => {
    hold();
    store.answer = () => Promise.resolve({ owned: true, stop: 'USER_STOP' });
    await vi.advanceTimersByTimeAsync(TTL / 3);
    expect(seen.stops).toEqual(['USER_STOP']);
    await vi.advanceTimersByTimeAsync(TTL / 3);
    expect(store.renewals).toHaveLength(2);
  });

  it('a store that keeps failing: retried, then reported expired before the lease can expire', async () => {
    const acquiredAt = Date.now();
    hold();
    store.answer = () => Promise.reject(new Error('connection refused'));
    await vi.advanceTimersByTimeAsync(TTL * 2);
    expect(seen.lost.map((l) => l.why)).toEqual(['expired']);
    const lostAt = seen.lost[0]?.at ?? Infinity;
    expect(lostAt).toBeLessThan(acquiredAt + TTL);
    expect(store.renewals.length).toBeGreaterThan(1);
    expect(seen.renews.every((r) => r === 'error')).toBe(true);
  });

  it('a renewal that never answers counts as failed at the lease deadline: lost before expiry, not after', async () => {
    const acquiredAt = Date.now();
    hold();
    store.answer = () => new Promise<RenewResult>(() => undefined);
    await vi.advanceTimersByTimeAsync(TTL * 2);
    expect(seen.lost.map((l) => l.why)).toEqual(['expired']);
    expect(seen.lost[0]?.at).toBeLessThan(acquiredAt + TTL);
  });

  it('a late success still counts from when it was sent, so the lease is never believed longer than it lives', async () => {
    const acquiredAt = Date.now();
    hold();
    // The first renewal (sent at +100) answers at +250: the lock then lives until +400, not +550.
    store.answer = () => new Promise((resolve) => setTimeout(() => resolve({ owned: true, stop: null }), 150));
    await vi.advanceTimersByTimeAsync(250);
    expect(lease?.remainingMs).toBe(acquiredAt + 100 + TTL - Date.now());
  });

  it('release stops the renewals and releases once, with the actor slot; a failing store resolves false', async () => {
    const l = hold({ actorId: 'u', member: 'token' });
    await vi.advanceTimersByTimeAsync(TTL / 3);
    store.releaseFails = true;
    const first = l.release('run-1');
    expect(l.release('run-1')).toBe(first);
    expect(await first).toBe(false);
    await vi.advanceTimersByTimeAsync(TTL * 2);
    expect(store.renewals).toHaveLength(1);
    expect(store.releases).toEqual([{ runId: 'run-1', actor: { actorId: 'u', member: 'token' } }]);
  });

  it('an answer that arrives after release fires no hook', async () => {
    const l = hold();
    let answer!: (r: RenewResult) => void;
    store.answer = () => new Promise((resolve) => (answer = resolve));
    await vi.advanceTimersByTimeAsync(TTL / 3);
    await l.release('run-1');
    answer({ owned: false, stop: 'USER_STOP' });
    await vi.advanceTimersByTimeAsync(TTL);
    expect(seen).toEqual({ lost: [], stops: [], renews: [] });
  });
});
