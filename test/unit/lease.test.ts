/**
 * The lease keeper on its own (docs/spec.md §5), against a fake store and a fake clock: one timer
 * and one batched renewal per tick for every lease due, each lease still seeing exactly
 * what it saw when it renewed itself — a lost token, the stop flag, a store that errors or
 * hangs (a lease is told it is lost before it can expire, each at its own deadline) — and
 * releases batched per turn of the event loop.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CoordinationError, type LeaseRenewal, type LockRelease, type ReleaseOutcome, type RenewOutcome } from '../../src/coordination/backend';
import type { Lease, LeaseHooks } from '../../src/coordination/lease';
import { LeaseKeeper, type LeaseBackend } from '../../src/coordination/lease-keeper';

const TTL = 300;
// Derived by the keeper: renewals every TTL/3, ticks every TTL/20, lost a TTL/10 before expiry.
const INTERVAL = 100;
const TICK = 15;
const MARGIN = 30;

type Answer = (lease: LeaseRenewal) => RenewOutcome;

/** A store whose answers the test chooses, per lease; every batch is recorded. */
class FakeStore implements LeaseBackend {
  readonly batches: Array<{ at: number; leases: LeaseRenewal[] }> = [];
  readonly releaseBatches: Array<{ at: number; releases: LockRelease[] }> = [];
  answer: Answer = () => ({ owned: true, stop: null });
  /** When set, batches are answered only when the test resolves them. */
  hold: Array<() => void> | undefined;
  /** Delays every answer by this many (fake) ms. */
  delayMs = 0;
  releaseFails = false;

  /**
   * When set, a part of every batch as a Cluster answers it: the leases it names are
   * answered at once (through `answered`), the others' primary never answers.
   */
  answersAtOnce: ((lease: LeaseRenewal) => boolean) | undefined;

  renewMany(_ttlMs: number, leases: readonly LeaseRenewal[], answered?: (index: number, outcome: RenewOutcome) => void): Promise<RenewOutcome[]> {
    this.batches.push({ at: Date.now(), leases: [...leases] });
    const answer = (): RenewOutcome[] => leases.map((l) => this.answer(l));
    const atOnce = this.answersAtOnce;
    if (atOnce) {
      leases.forEach((l, i) => {
        if (atOnce(l)) queueMicrotask(() => answered?.(i, this.answer(l)));
      });
      return new Promise(() => undefined);
    }
    if (this.hold) {
      const held = this.hold;
      return new Promise((resolve) => held.push(() => resolve(answer())));
    }
    if (this.delayMs > 0) return new Promise((resolve) => setTimeout(() => resolve(answer()), this.delayMs));
    return Promise.resolve(answer());
  }

  async releaseMany(releases: readonly LockRelease[]): Promise<ReleaseOutcome[]> {
    this.releaseBatches.push({ at: Date.now(), releases: [...releases] });
    if (this.releaseFails) throw new CoordinationError('store down');
    return releases.map(() => null);
  }

  /** Renewal times of one workflow's lease. */
  renewalsOf(workflowId: string): number[] {
    return this.batches.filter((b) => b.leases.some((l) => l.workflowId === workflowId)).map((b) => b.at);
  }
}

interface Seen {
  lost: Array<{ why: string; at: number }>;
  stops: string[];
  renews: string[];
}

let store: FakeStore;
let keeper: LeaseKeeper;
let late: number;
let t0: number;
const seen = new Map<string, Seen>();
const held: Lease[] = [];

function hooks(workflowId: string): LeaseHooks {
  const s: Seen = { lost: [], stops: [], renews: [] };
  seen.set(workflowId, s);
  return {
    onLost: (why) => s.lost.push({ why, at: Date.now() - t0 }),
    onStop: (value) => s.stops.push(value),
    onRenew: (result) => s.renews.push(result),
    refresh: () => ({ runId: `run-${workflowId}`, record: { state: 'running', lastActionAt: '' } }),
  };
}

function hold(workflowId: string, actor?: { actorId: string; member: string }): Lease {
  const lease = keeper.hold(workflowId, { token: `token-${workflowId}`, acquiredAt: Date.now(), ...(actor ? { actor } : {}) }, hooks(workflowId));
  held.push(lease);
  return lease;
}

const of = (workflowId: string): Seen => seen.get(workflowId) as Seen;

beforeEach(() => {
  // setImmediate stays real: the releaser batches per turn of the event loop, which the tests await.
  vi.useFakeTimers({ now: 1_000_000, toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'] });
  t0 = Date.now();
  store = new FakeStore();
  late = 0;
  keeper = new LeaseKeeper(store, { ttlMs: TTL, onLate: () => (late += 1) });
  seen.clear();
});

afterEach(async () => {
  await Promise.all(held.splice(0).map((l) => l.release('run')));
  keeper.close();
  vi.useRealTimers();
});

describe('LeaseKeeper: timing', () => {
  it('derives its tick, interval and margin from the TTL', () => {
    expect({ tick: keeper.tickMs, interval: keeper.intervalMs, margin: keeper.marginMs }).toEqual({ tick: TICK, interval: INTERVAL, margin: MARGIN });
    // At the default 60 s lease: a renewal every 20 s, looked at every second.
    const dflt = new LeaseKeeper(store, { ttlMs: 60_000 });
    expect({ tick: dflt.tickMs, interval: dflt.intervalMs, margin: dflt.marginMs }).toEqual({ tick: 1_000, interval: 20_000, margin: 6_000 });
  });

  it('renews each lease every TTL/3 (at most one tick early), refreshing its run record and actor slot', async () => {
    hold('a', { actorId: 'u', member: 'token-a' });
    await vi.advanceTimersByTimeAsync(TTL * 2);
    const at = store.renewalsOf('a').map((t) => t - t0);
    expect(at.length).toBeGreaterThanOrEqual(6);
    let previous = 0;
    for (const t of at) {
      expect(t - previous).toBeLessThanOrEqual(INTERVAL);
      expect(t - previous).toBeGreaterThan(INTERVAL - TICK - 1);
      previous = t;
    }
    expect(store.batches[0]?.leases[0]).toEqual({
      workflowId: 'a',
      token: 'token-a',
      refresh: { runId: 'run-a', record: { state: 'running', lastActionAt: '' }, actor: { actorId: 'u', member: 'token-a' } },
    });
    expect(of('a').renews.every((r) => r === 'ok')).toBe(true);
    expect(of('a').lost).toEqual([]);
    expect(late).toBe(0);
  });

  it('one call per tick renews every lease due in it, however many leases are held', async () => {
    // 200 leases taken over 100 ms (one renewal interval): spread, as runs start.
    for (let i = 0; i < 200; i++) {
      hold(`w${i}`);
      await vi.advanceTimersByTimeAsync(0.5);
    }
    await vi.advanceTimersByTimeAsync(TTL * 3);
    const renewals = store.batches.reduce((n, b) => n + b.leases.length, 0);
    // Every lease renewed about every interval...
    expect(renewals).toBeGreaterThanOrEqual(200 * 8);
    // ...in at most one call per tick (each lease once per call), not one call per renewal.
    expect(store.batches.length).toBeLessThanOrEqual(Math.ceil((TTL * 3 + 100) / TICK) + 1);
    for (const batch of store.batches) expect(new Set(batch.leases.map((l) => l.workflowId)).size).toBe(batch.leases.length);
    for (let i = 0; i < 200; i++) expect(of(`w${i}`).lost).toEqual([]);
  });

  it('holds no timer while it holds no lease', async () => {
    expect(vi.getTimerCount()).toBe(0);
    const lease = hold('a');
    expect(vi.getTimerCount()).toBe(1);
    await lease.release('run-a');
    expect(vi.getTimerCount()).toBe(0);
    hold('b');
    keeper.close();
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('LeaseKeeper: what each lease sees', () => {
  it('a batch where some leases are owned, some taken, some stopped: each gets its own answer', async () => {
    for (const id of ['owned', 'taken', 'stopped', 'taken-and-stopped']) hold(id);
    store.answer = (l) => ({
      owned: !l.workflowId.startsWith('taken'),
      stop: l.workflowId === 'stopped' || l.workflowId === 'taken-and-stopped' ? 'USER_STOP' : null,
    });
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(store.batches).toHaveLength(1);
    expect(store.batches[0]?.leases).toHaveLength(4);
    expect(of('owned')).toEqual({ lost: [], stops: [], renews: ['ok'] });
    expect(of('stopped')).toEqual({ lost: [], stops: ['USER_STOP'], renews: ['ok'] });
    // A lost lease is lost: the stop flag beside it does not matter (the run stops anyway).
    expect(of('taken')).toMatchObject({ lost: [{ why: 'taken' }], stops: [] });
    expect(of('taken-and-stopped')).toMatchObject({ lost: [{ why: 'taken' }], stops: [] });
    await vi.advanceTimersByTimeAsync(INTERVAL * 2);
    // Taken leases are renewed no more; the others go on (the stopped one until its run releases it).
    expect(store.renewalsOf('taken')).toHaveLength(1);
    expect(store.renewalsOf('owned').length).toBeGreaterThanOrEqual(3);
    expect(store.renewalsOf('stopped').length).toBeGreaterThanOrEqual(3);
  });

  it('a part of a batch the store could not run (one primary down) retries those leases alone', async () => {
    hold('ok');
    hold('down');
    let failing = true;
    store.answer = (l) => (l.workflowId === 'down' && failing ? new CoordinationError('primary down') : { owned: true, stop: null });
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(of('ok').renews).toEqual(['ok']);
    expect(of('down').renews).toEqual(['error']);
    // Retried a margin later (a tick early at most), alone: the other lease is not due.
    const before = store.batches.length;
    await vi.advanceTimersByTimeAsync(MARGIN);
    expect(store.batches.length).toBeGreaterThan(before);
    for (const batch of store.batches.slice(before)) expect(batch.leases.map((l) => l.workflowId)).toEqual(['down']);
    expect(late).toBe(0);
    failing = false;
    await vi.advanceTimersByTimeAsync(MARGIN);
    expect(of('down').renews.at(-1)).toBe('ok');
    expect(
      of('down')
        .renews.slice(0, -1)
        .every((r) => r === 'error'),
    ).toBe(true);
    expect(of('down').lost).toEqual([]);
    expect(of('ok').renews).toEqual(['ok']);
    // Confirmed more than a tick after it was due: counted late.
    expect(late).toBe(1);
  });

  it('a store that keeps failing: retried, then reported expired before the lease can expire', async () => {
    hold('a');
    store.answer = () => new CoordinationError('connection refused');
    await vi.advanceTimersByTimeAsync(TTL * 2);
    expect(of('a').lost.map((l) => l.why)).toEqual(['expired']);
    expect(of('a').lost[0]?.at).toBeLessThan(TTL);
    expect(of('a').lost[0]?.at).toBeGreaterThanOrEqual(TTL - MARGIN);
    expect(store.renewalsOf('a').length).toBeGreaterThan(1);
    expect(of('a').renews.every((r) => r === 'error')).toBe(true);
  });

  it('a renewMany that rejects outright counts as an error for every lease in it', async () => {
    hold('a');
    hold('b');
    store.renewMany = () => Promise.reject(new Error('socket closed'));
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(of('a').renews).toEqual(['error']);
    expect(of('b').renews).toEqual(['error']);
  });

  it('a batch that hangs: given up and retried, and each lease is reported lost at its own deadline, before it expires', async () => {
    store.hold = [];
    hold('early');
    await vi.advanceTimersByTimeAsync(INTERVAL);
    hold('later');
    await vi.advanceTimersByTimeAsync(TTL * 3);
    const early = of('early').lost;
    const later = of('later').lost;
    expect(early.map((l) => l.why)).toEqual(['expired']);
    expect(later.map((l) => l.why)).toEqual(['expired']);
    // Each before its own lock could expire (taken at 0 and at ~100)...
    expect(early[0]?.at).toBeLessThan(TTL);
    expect(later[0]?.at).toBeLessThan(INTERVAL + TTL);
    // ...and not all at once: the later lease was still good when the early one was lost.
    expect(later[0]?.at).toBeGreaterThan((early[0]?.at ?? 0) + INTERVAL / 2);
    // Hung renewals were given up and sent again, not waited on forever.
    expect(store.renewalsOf('early').length).toBeGreaterThan(1);
    expect(of('early').renews.every((r) => r === 'error')).toBe(true);
    // Answers that come after a lease was lost fire nothing.
    for (const resolve of store.hold) resolve();
    await vi.advanceTimersByTimeAsync(TICK);
    expect(of('early').renews.every((r) => r === 'error')).toBe(true);
    expect(of('early').lost).toHaveLength(1);
  });

  it('a part of a batch that hangs (a Cluster primary down) holds back only its own leases: the others are confirmed as their part answers', async () => {
    store.answersAtOnce = (l) => l.workflowId === 'healthy';
    hold('healthy');
    hold('dead');
    await vi.advanceTimersByTimeAsync(TTL * 3);
    expect(of('dead').lost.map((l) => l.why)).toEqual(['expired']);
    expect(of('healthy').lost).toEqual([]);
    expect(of('healthy').renews.length).toBeGreaterThanOrEqual(8);
    expect(of('healthy').renews.every((r) => r === 'ok')).toBe(true);
  });

  it('a late success counts from when it was sent, so the lease is never believed longer than it lives; it is counted late', async () => {
    const lease = hold('a');
    // Sent at +90 (a tick early), answered 27 ms later: more than a tick after it was due
    // (+100), not yet given up (TTL/6, 50 ms, after it was sent).
    store.delayMs = 27;
    await vi.advanceTimersByTimeAsync(INTERVAL + 21);
    expect(of('a').renews).toEqual(['ok']);
    const sentAt = (store.renewalsOf('a')[0] as number) - t0;
    expect(lease.remainingMs).toBe(sentAt + TTL - (Date.now() - t0));
    expect(late).toBe(1);
  });

  it('leases taken while a batch is in flight go in a later batch; one released meanwhile is not reported on', async () => {
    store.hold = [];
    const first = hold('first');
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(store.batches).toHaveLength(1);
    hold('second');
    await first.release('run-first');
    const resolvers = store.hold;
    store.hold = undefined;
    store.answer = () => ({ owned: false, stop: 'USER_STOP' });
    for (const resolve of resolvers) resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(of('first')).toEqual({ lost: [], stops: [], renews: [] });
    store.answer = () => ({ owned: true, stop: null });
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(store.batches.at(-1)?.leases.map((l) => l.workflowId)).toEqual(['second']);
    expect(of('second').renews).toEqual(['ok']);
  });
});

describe('LeaseKeeper: release', () => {
  it('stops the renewals and releases once, with the actor slot; a failing store resolves false', async () => {
    const lease = hold('a', { actorId: 'u', member: 'token-a' });
    await vi.advanceTimersByTimeAsync(INTERVAL);
    store.releaseFails = true;
    const first = lease.release('run-a');
    expect(lease.release('run-a')).toBe(first);
    expect(await first).toBe(false);
    expect(lease.state).toBe('released');
    await vi.advanceTimersByTimeAsync(TTL * 2);
    expect(store.renewalsOf('a')).toHaveLength(1);
    expect(store.releaseBatches.map((b) => b.releases)).toEqual([[{ workflowId: 'a', token: 'token-a', runId: 'run-a', actor: { actorId: 'u', member: 'token-a' } }]]);
  });

  it('releases asked for in one turn of the event loop go in one batch, each told its own outcome', async () => {
    const leases = ['a', 'b', 'c'].map((id) => hold(id));
    const released = await Promise.all([...leases.map((l) => l.release(`run-${l.workflowId}`)), keeper.releaseLock({ workflowId: 'd', token: 'token-d', runId: '' })]);
    expect(released).toEqual([true, true, true, true]);
    expect(store.releaseBatches).toHaveLength(1);
    expect(store.releaseBatches[0]?.releases.map((r) => r.workflowId)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('a lease lost before its release is still released (compare-and-delete decides)', async () => {
    const lease = hold('a');
    store.answer = () => ({ owned: false, stop: null });
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(lease.state).toBe('lost');
    expect(await lease.release('run-a')).toBe(true);
    expect(store.releaseBatches).toHaveLength(1);
  });
});
