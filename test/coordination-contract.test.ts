/**
 * One contract, two coordination backends (SPEC §5): the in-process one and Redis (a real
 * redis-server) must behave alike, so the same suite runs against both — locks, leases,
 * stop keys and notices, run records, actor slots, expiry (real time, short TTLs).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CoordinationBackend, RunRecord } from '../src/coordination/backend';
import { MemoryBackend } from '../src/coordination/memory-backend';
import { RedisBackend } from '../src/coordination/redis-backend';
import { parseRedisUrl } from '../src/coordination/redis-url';
import { startRedis, type RedisServer } from './helpers/redis';

let redis: RedisServer | undefined;

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

const backends: Array<[string, () => Promise<CoordinationBackend>]> = [
  ['memory', () => Promise.resolve(new MemoryBackend())],
  [
    'redis',
    async () => {
      const backend = new RedisBackend(parseRedisUrl(redis!.url), { commandTimeoutMs: 2_000, connectTimeoutMs: 2_000 });
      expect(await backend.waitReady(5_000)).toBe(true);
      return backend;
    },
  ],
];

const refresh = (runId: string, lastActionAt = ''): { runId: string; state: string; lastActionAt: string } => ({ runId, state: 'running', lastActionAt });
const record = (runId: string): RunRecord => ({ run_id: runId, replica: 'r1', transport: 'detached', state: 'running', started_at: '2026-11-30T00:00:00.000Z', last_action_at: '' });

describe.each(backends)('coordination backend contract: %s', (kind, make) => {
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
});
