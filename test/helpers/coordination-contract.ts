/**
 * The coordination backend contract (docs/spec.md §5), as one function that defines the suite for
 * one backend inside a describe: test/integration/coordination-contract.test.ts runs it
 * against the in-process backend and a real redis-server, test/process/redis-cluster.test.ts
 * against a real Redis Cluster.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationError, type CoordinationBackend, type LeaseRefresh, type StoredRunRecord } from '../../src/coordination/backend';

const refresh = (runId: string, lastActionAt = ''): LeaseRefresh => ({ runId, record: { state: 'running', lastActionAt } });
const record = (runId: string): StoredRunRecord => ({
  run_id: runId,
  replica: 'r1',
  transport: 'detached',
  state: 'running',
  started_at: '2026-11-30T00:00:00.000Z',
  last_action_at: '',
});

/** The contract, for one backend (called inside a describe). */
export function coordinationContract(kind: string, make: () => Promise<CoordinationBackend>): void {
  let backend: CoordinationBackend;
  let n = 0;
  /** A fresh workflow id per test: the keys are fixed-prefix, the id is the namespace. */
  const id = (): string => `${kind}-${process.pid}-${++n}`;

  beforeAll(async () => {
    backend = await make();
  });
  afterAll(async () => {
    await backend.close();
  });

  it('acquire is NX: the first token wins, others see it taken', async () => {
    const w = id();
    expect(await backend.acquire(w, 'a', 10_000)).toBe(true);
    expect(await backend.acquire(w, 'b', 10_000)).toBe(false);
    expect(await backend.acquire(w, 'a', 10_000)).toBe(false);
  });

  it('renew extends only the token holding the lock and reads the stop flag in the same answer', async () => {
    const w = id();
    await backend.acquire(w, 'a', 10_000);
    expect(await backend.renew(w, 'a', 10_000, refresh('run-a'))).toEqual({ owned: true, stop: null });
    expect(await backend.renew(w, 'b', 10_000, refresh('run-b'))).toEqual({ owned: false, stop: null });
    expect(await backend.requestStop(w, 'USER_STOP', 10_000)).toBe(true);
    expect(await backend.renew(w, 'a', 10_000, refresh('run-a'))).toEqual({ owned: true, stop: 'USER_STOP' });
    expect(await backend.renew(w, 'b', 10_000, refresh('run-b'))).toEqual({ owned: false, stop: 'USER_STOP' });
  });

  it('a lock expires after its TTL unless renewed; a renewal keeps it', async () => {
    const [kept, dropped] = [id(), id()];
    await backend.acquire(kept, 'a', 600);
    await backend.acquire(dropped, 'a', 600);
    await sleep(300);
    expect((await backend.renew(kept, 'a', 600, refresh('run'))).owned).toBe(true);
    // 750 ms in: `dropped` expired at 600, `kept` lives until 900.
    await sleep(450);
    expect(await backend.acquire(dropped, 'b', 600)).toBe(true);
    expect(await backend.acquire(kept, 'b', 600)).toBe(false);
    expect((await backend.renew(kept, 'a', 600, refresh('run'))).owned).toBe(true);
  });

  it('release is compare-and-delete: another token changes nothing; the holder frees the lock and its stop key', async () => {
    const w = id();
    await backend.acquire(w, 'a', 10_000);
    await backend.requestStop(w, 'USER_STOP', 10_000);
    await backend.release(w, 'b', 'run-b');
    expect(await backend.acquire(w, 'b', 10_000)).toBe(false);
    expect(await backend.readStop(w)).toBe('USER_STOP');
    await backend.release(w, 'a', 'run-a');
    expect(await backend.readStop(w)).toBeNull();
    expect(await backend.acquire(w, 'b', 10_000)).toBe(true);
  });

  it('a stop key meant for a later holder survives the release of an earlier one', async () => {
    const w = id();
    await backend.acquire(w, 'a', 300);
    await sleep(400);
    await backend.acquire(w, 'b', 10_000);
    await backend.requestStop(w, 'USER_STOP', 10_000);
    await backend.release(w, 'a', 'run-a');
    expect(await backend.readStop(w)).toBe('USER_STOP');
  });

  it('stop requests: refused with no run in flight, set and announced while one is, cleared, and stale ones dropped by acquire', async () => {
    const w = id();
    const notices: string[] = [];
    backend.onStopNotice((workflowId) => {
      if (workflowId === w) notices.push(workflowId);
    });
    expect(await backend.requestStop(w, 'USER_STOP', 10_000)).toBe(false);
    expect(await backend.readStop(w)).toBeNull();
    await backend.acquire(w, 'a', 300);
    expect(await backend.requestStop(w, 'CUSTOM_REASON', 10_000)).toBe(true);
    await expect.poll(() => notices.length, { timeout: 2_000 }).toBeGreaterThanOrEqual(1);
    expect(await backend.readStops([w, id()])).toEqual(['CUSTOM_REASON', null]);
    await backend.clearStop(w);
    expect(await backend.readStop(w)).toBeNull();
    await backend.requestStop(w, 'USER_STOP', 10_000);
    await sleep(400);
    // The lock expired with the stop key still set: the next run's acquire clears it.
    expect(await backend.acquire(w, 'b', 10_000)).toBe(true);
    expect(await backend.readStop(w)).toBeNull();
  });

  it('a stop key expires after its TTL', async () => {
    const w = id();
    await backend.acquire(w, 'a', 10_000);
    await backend.requestStop(w, 'USER_STOP', 200);
    await sleep(300);
    expect(await backend.readStop(w)).toBeNull();
  });

  it('run records: written, refreshed by the holder’s renewal, deleted only by their own run', async () => {
    const w = id();
    await backend.acquire(w, 'a', 10_000);
    await backend.writeRunRecord(w, record('run-a'), 10_000);
    await backend.renew(w, 'a', 10_000, refresh('run-a', '2026-11-30T01:00:00.000Z'));
    expect(await backend.readRunRecord(w)).toEqual({ ...record('run-a'), last_action_at: '2026-11-30T01:00:00.000Z' });
    await backend.renew(w, 'a', 10_000, refresh('run-other', 'never'));
    expect((await backend.readRunRecord(w))?.last_action_at).toBe('2026-11-30T01:00:00.000Z');
    await backend.release(w, 'a', 'run-other');
    expect(await backend.readRunRecord(w)).not.toBeNull();
    await backend.release(w, 'a', 'run-a');
    expect(await backend.readRunRecord(w)).toBeNull();
  });

  it('a renewal that names no fields (none changed) extends the record’s TTL and leaves it as written', async () => {
    const w = id();
    await backend.acquire(w, 'a', 1_000);
    await backend.writeRunRecord(w, record('run-a'), 1_000);
    await sleep(600);
    expect(await backend.renew(w, 'a', 1_000, { runId: 'run-a' })).toEqual({ owned: true, stop: null });
    await sleep(600);
    // Past the TTL it was written with: extended, every field as written.
    expect(await backend.readRunRecord(w)).toEqual(record('run-a'));
    // Another run's renewal extends the lock it holds, never this record.
    expect((await backend.renew(w, 'a', 1_000, { runId: 'run-other' })).owned).toBe(true);
    await sleep(600);
    expect(await backend.readRunRecord(w)).toBeNull();
  });

  it('a run record lives as long as the lease it was written with', async () => {
    const w = id();
    await backend.acquire(w, 'a', 300);
    await backend.writeRunRecord(w, record('run-a'), 300);
    await sleep(400);
    expect(await backend.readRunRecord(w)).toBeNull();
  });

  it('actor slots: capped, re-entrant for the same member, freed by release, renewed with the lease, expired when not', async () => {
    const actor = id();
    expect(await backend.acquireActorSlot(actor, 'm1', 2, 600)).toBe(true);
    expect(await backend.acquireActorSlot(actor, 'm2', 2, 600)).toBe(true);
    expect(await backend.acquireActorSlot(actor, 'm2', 2, 600)).toBe(true);
    expect(await backend.acquireActorSlot(actor, 'm3', 2, 600)).toBe(false);
    await backend.releaseActorSlot(actor, 'm1');
    expect(await backend.acquireActorSlot(actor, 'm3', 2, 600)).toBe(true);
    // m2 is renewed with its run's lease; m3 is left to expire.
    const w = id();
    await backend.acquire(w, 'm2', 600);
    await sleep(300);
    await backend.renew(w, 'm2', 600, { ...refresh('run'), actor: { actorId: actor, member: 'm2' } });
    // 750 ms in: m3 expired at 600, m2 lives until 900.
    await sleep(450);
    expect(await backend.acquireActorSlot(actor, 'm4', 2, 600)).toBe(true);
    expect(await backend.acquireActorSlot(actor, 'm5', 2, 600)).toBe(false);
    await backend.release(w, 'm2', 'run', { actorId: actor, member: 'm2' });
    expect(await backend.acquireActorSlot(actor, 'm5', 2, 600)).toBe(true);
  });

  it('renewMany: one answer per lease, as renew would give it — owned, taken, stopped, gone — and only held leases refresh', async () => {
    const [owned, taken, stopped, gone] = [id(), id(), id(), id()];
    const actor = id();
    for (const w of [owned, taken, stopped]) await backend.acquire(w, `t-${w}`, 10_000);
    await backend.writeRunRecord(owned, record('run-owned'), 10_000);
    await backend.writeRunRecord(taken, record('run-taken'), 10_000);
    await backend.requestStop(stopped, 'CUSTOM_REASON', 10_000);
    expect(await backend.acquireActorSlot(actor, `t-${owned}`, 3, 600)).toBe(true);
    expect(await backend.acquireActorSlot(actor, `t-${taken}`, 3, 600)).toBe(true);
    const leases = [owned, taken, stopped, gone].map((w) => ({
      workflowId: w,
      token: w === taken ? 'not-the-token' : `t-${w}`,
      refresh: { ...refresh(`run-${w === owned ? 'owned' : w === taken ? 'taken' : 'x'}`, '2026-11-30T02:00:00.000Z'), actor: { actorId: actor, member: `t-${w}` } },
    }));
    await sleep(300);
    expect(await backend.renewMany(600, leases)).toEqual([
      { owned: true, stop: null },
      { owned: false, stop: null },
      { owned: true, stop: 'CUSTOM_REASON' },
      { owned: false, stop: null },
    ]);
    expect((await backend.readRunRecord(owned))?.last_action_at).toBe('2026-11-30T02:00:00.000Z');
    // Not held by that token: its record is left as it was.
    expect((await backend.readRunRecord(taken))?.last_action_at).toBe('');
    // 750 ms in: the held leases' actor slots live on (to 900: `owned` pushed on, `stopped`
    // held, so counted), `taken`'s expired at 600, and none was added for `gone`: of the cap
    // of 3, one is free.
    await sleep(450);
    expect(await backend.acquireActorSlot(actor, 'x1', 3, 600)).toBe(true);
    expect(await backend.acquireActorSlot(actor, 'x2', 3, 600)).toBe(false);
  });

  it('renewMany and releaseMany carry batches larger than one script call', async () => {
    const ids = Array.from({ length: 1_234 }, id);
    await Promise.all(ids.map((w) => backend.acquire(w, `t-${w}`, 10_000)));
    const outcomes = await backend.renewMany(
      10_000,
      ids.map((w, i) => ({ workflowId: w, token: i % 2 === 0 ? `t-${w}` : 'other', refresh: refresh('run') })),
    );
    expect(outcomes.map((o) => (o instanceof CoordinationError ? 'error' : o.owned))).toEqual(ids.map((_w, i) => i % 2 === 0));
    expect(await backend.releaseMany(ids.map((w) => ({ workflowId: w, token: `t-${w}`, runId: '' })))).toEqual(ids.map(() => null));
    expect(await backend.acquire(ids[0] as string, 'next', 10_000)).toBe(true);
    expect(await backend.acquire(ids[1_233] as string, 'next', 10_000)).toBe(true);
  });

  it('releaseMany: compare-and-delete per lock, each with its run record, stop key and actor slot', async () => {
    const [mine, theirs] = [id(), id()];
    const actor = id();
    await backend.acquire(mine, 'a', 10_000);
    await backend.acquire(theirs, 'b', 10_000);
    await backend.writeRunRecord(mine, record('run-mine'), 10_000);
    await backend.writeRunRecord(theirs, record('run-theirs'), 10_000);
    await backend.requestStop(mine, 'USER_STOP', 10_000);
    await backend.requestStop(theirs, 'USER_STOP', 10_000);
    expect(await backend.acquireActorSlot(actor, 'a', 1, 10_000)).toBe(true);
    expect(
      await backend.releaseMany([
        { workflowId: mine, token: 'a', runId: 'run-mine', actor: { actorId: actor, member: 'a' } },
        { workflowId: theirs, token: 'not-b', runId: 'run-other' },
      ]),
    ).toEqual([null, null]);
    expect(await backend.readRunRecord(mine)).toBeNull();
    expect(await backend.readStop(mine)).toBeNull();
    expect(await backend.acquire(mine, 'c', 10_000)).toBe(true);
    // Another token's lock, record and stop key are untouched.
    expect(await backend.acquire(theirs, 'c', 10_000)).toBe(false);
    expect(await backend.readRunRecord(theirs)).not.toBeNull();
    expect(await backend.readStop(theirs)).toBe('USER_STOP');
    // The actor's only slot was given back.
    expect(await backend.acquireActorSlot(actor, 'd', 1, 10_000)).toBe(true);
  });
}
