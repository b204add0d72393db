/**
 * The store fence against real redis-servers (docs/spec.md §5, store-fence.lua): what a new
 * store is (no marker, up longer than a lease TTL, never a replica, nothing flushed or
 * evicted: it serves at once) and what lost its data (a restart, a promoted replica, a
 * flush, a marker naming another server: fenced), and `longrun store mark`'s function,
 * which marks the first and refuses the second. Short lease TTLs keep it quick: a server is
 * "older than a TTL" after a second or two.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { LockStoreFenced, type LeaseRefresh } from '../../src/coordination/backend';
import { RedisBackend } from '../../src/coordination/redis-backend';
import { parseRedisUrl } from '../../src/redis/url';
import { markNewStore } from '../../src/coordination/store-mark';
import { resume, startRedis, type RedisServer, type RedisServerOptions } from '../../stack/redis-server';

const MARKER = 'longrun:store';
const refresh: LeaseRefresh = { runId: 'run' };

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function server(options: RedisServerOptions = {}): Promise<RedisServer> {
  const started = await startRedis({ mark: false, ...options });
  cleanup.push(() => started.stop());
  return started;
}

function client(url: string): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  cleanup.push(() => redis.disconnect());
  return redis;
}

async function backendOn(url: string): Promise<RedisBackend> {
  const backend = new RedisBackend(parseRedisUrl(url), { commandTimeoutMs: 2_000, connectTimeoutMs: 2_000 });
  cleanup.push(() => backend.close());
  expect(await backend.waitReady(5_000)).toBe(true);
  return backend;
}

const infoField = async (redis: Redis, section: string, field: string): Promise<string | undefined> => new RegExp(`^${field}:(\\S+)`, 'm').exec(await redis.info(section))?.[1];

/** Resolves once the server has been up at least `ms` (by its own uptime_in_seconds). */
async function upFor(redis: Redis, ms: number): Promise<void> {
  await expect.poll(async () => Number(await infoField(redis, 'server', 'uptime_in_seconds')) * 1_000 >= ms, { timeout: ms + 3_000, interval: 100 }).toBe(true);
}

/** What acquire threw, when it was the store fence. */
async function fenceOf(backend: RedisBackend, workflowId: string, ttlMs: number): Promise<LockStoreFenced> {
  const err = await backend.acquire(workflowId, 'token', ttlMs).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(LockStoreFenced);
  return err as LockStoreFenced;
}

describe('a Redis without the marker', () => {
  const TTL_MS = 1_000;

  it('up longer than a lease TTL, never a replica, nothing flushed: new, it grants the first lock at once and is marked (no fence)', async () => {
    const redis = await server();
    const direct = client(redis.url);
    await upFor(direct, TTL_MS);
    const backend = await backendOn(redis.url);
    expect(await backend.acquire('w1', 'a', TTL_MS)).toBe(true);
    expect(await direct.hgetall(MARKER)).toEqual({ run_id: await infoField(direct, 'server', 'run_id'), fenced_until: '0', fence: 'new' });
    expect(backend.storeFences()).toEqual([{ primary: `127.0.0.1:${redis.port}`, remainingMs: 0, why: undefined }]);
  });

  it('younger than a lease TTL: fenced as new until it is a TTL old (counted from its start, not from the first look), then granted without anyone marking it', async () => {
    // Long enough that the first look comes before the end on a loaded machine.
    const ttlMs = 5_000;
    const redis = await server();
    const direct = client(redis.url);
    await upFor(direct, 1_000);
    const backend = await backendOn(redis.url);
    const fence = await fenceOf(backend, 'w1', ttlMs);
    expect(fence.why).toBe('new');
    // Up at least a second already: at most four seconds are left of its five.
    expect(fence.retryAfterMs).toBeGreaterThan(0);
    expect(fence.retryAfterMs).toBeLessThanOrEqual(ttlMs - 1_000);
    expect(backend.storeFences()[0]).toMatchObject({ primary: `127.0.0.1:${redis.port}`, why: 'new' });
    await sleep(fence.retryAfterMs + 50);
    expect(await backend.acquire('w1', 'a', ttlMs)).toBe(true);
  });

  it('restarted empty under a live holder: "new" until the holder renews the lock it lost, then "lost its data" with the same end; the holder gets its lock back, a start elsewhere is refused', async () => {
    const ttlMs = 4_000;
    const redis = await startRedis();
    cleanup.push(() => redis.stop());
    const holder = await backendOn(redis.url);
    const other = await backendOn(redis.url);
    expect(await holder.acquire('held', 'h', ttlMs)).toBe(true);
    await redis.restart();
    await expect.poll(() => other.acquire('free-1', 'o', ttlMs).catch((e: unknown) => e), { timeout: 5_000, interval: 50 }).toBeInstanceOf(LockStoreFenced);
    const before = await fenceOf(other, 'free-1', ttlMs);
    expect(before.why).toBe('new');
    expect(await holder.renew('held', 'h', ttlMs, refresh)).toEqual({ owned: true, reasserted: true, stop: null });
    const after = await fenceOf(other, 'free-2', ttlMs);
    expect(after.why).toBe('lost');
    // The same fence: it ends when the server is a TTL old, whoever detected it.
    expect(Math.abs(before.retryAfterMs - after.retryAfterMs)).toBeLessThan(1_500);
    expect(await other.acquire('held', 'o', ttlMs)).toBe(false);
  });

  it('a replica promoted since it started, up for long, that never received the marker and the first lock: fenced as lost (a failover), and the lock’s holder takes it back', async () => {
    const primary = await server();
    const replica = await server({ args: ['--replicaof', '127.0.0.1', String(primary.port), '--repl-diskless-sync-delay', '0'] });
    const onPrimary = client(primary.url);
    const onReplica = client(replica.url);
    await expect.poll(() => infoField(onReplica, 'replication', 'master_link_status'), { timeout: 10_000, interval: 50 }).toBe('up');
    await upFor(onPrimary, TTL_MS);
    await upFor(onReplica, TTL_MS);
    // The replica hears nothing of the first lock: stopped, its link cut before the lock is
    // taken (what the primary had sent before stays unread in the socket otherwise), and the
    // primary crashes before it wakes.
    process.kill(replica.pid as number, 'SIGSTOP');
    cleanup.push(() => resume(replica));
    await onPrimary.client('KILL', 'TYPE', 'replica');
    const holder = await backendOn(primary.url);
    // Up longer than the TTL: judged new, marked with the lock in one script.
    expect(await holder.acquire('first', 'h', TTL_MS)).toBe(true);
    expect(await onPrimary.hget(MARKER, 'fence')).toBe('new');
    await primary.kill();
    resume(replica);
    await onReplica.call('REPLICAOF', 'NO', 'ONE');
    // Neither marker nor lock, and up longer than a TTL: only its replication says it may have lost them.
    expect(await onReplica.exists(MARKER, 'workhorse:duoworkflow:lock:first')).toBe(0);
    expect(await infoField(onReplica, 'replication', 'second_repl_offset')).not.toBe('-1');
    const starter = await backendOn(replica.url);
    const fence = await fenceOf(starter, 'first', 10_000);
    expect(fence.why).toBe('lost');
    expect(fence.retryAfterMs).toBeGreaterThan(9_000);
    // The holder's renewal reaches the new primary under the fence: its lock is back.
    const moved = await backendOn(replica.url);
    expect(await moved.renew('first', 'h', 10_000, refresh)).toEqual({ owned: true, reasserted: true, stop: null });
    expect(await onReplica.get('workhorse:duoworkflow:lock:first')).toBe('h');
  });

  it('a replica promoted with the marker it received: the marker names the old primary, fenced as lost', async () => {
    const primary = await server();
    const replica = await server({ args: ['--replicaof', '127.0.0.1', String(primary.port), '--repl-diskless-sync-delay', '0'] });
    const onReplica = client(replica.url);
    await expect.poll(() => infoField(onReplica, 'replication', 'master_link_status'), { timeout: 10_000, interval: 50 }).toBe('up');
    expect((await markNewStore(parseRedisUrl(primary.url))).outcome).toBe('marked');
    await expect.poll(() => onReplica.exists(MARKER), { timeout: 5_000, interval: 20 }).toBe(1);
    await onReplica.call('REPLICAOF', 'NO', 'ONE');
    const fence = await fenceOf(await backendOn(replica.url), 'w', 5_000);
    expect(fence.why).toBe('lost');
  });

  it('flushed (FLUSHALL) on a server up for long: its marker went with the locks, fenced as lost, not judged new', async () => {
    const redis = await server();
    const direct = client(redis.url);
    await upFor(direct, TTL_MS);
    const backend = await backendOn(redis.url);
    expect(await backend.acquire('w1', 'a', TTL_MS)).toBe(true);
    await direct.flushall();
    const fence = await fenceOf(backend, 'w2', 10_000);
    expect(fence.why).toBe('lost');
    expect(fence.retryAfterMs).toBeGreaterThan(9_000);
  });

  it('its statistics reset (CONFIG RESETSTAT could hide a flush): fenced as lost', async () => {
    const redis = await server();
    const direct = client(redis.url);
    await direct.config('RESETSTAT');
    await upFor(direct, TTL_MS);
    expect((await fenceOf(await backendOn(redis.url), 'w', TTL_MS)).why).toBe('lost');
  });

  it('that evicted keys (allkeys-random under maxmemory): fenced as lost', async () => {
    const redis = await server({ args: ['--maxmemory', '2mb', '--maxmemory-policy', 'allkeys-random'] });
    const direct = client(redis.url);
    const value = 'x'.repeat(1_024);
    for (let i = 0; i < 4_000 && Number(await infoField(direct, 'stats', 'evicted_keys')) === 0; i += 100) {
      await direct.mset(Object.fromEntries(Array.from({ length: 100 }, (_, j) => [`filler:${i + j}`, value])));
    }
    expect(Number(await infoField(direct, 'stats', 'evicted_keys'))).toBeGreaterThan(0);
    await direct.del(MARKER);
    await upFor(direct, TTL_MS);
    expect((await fenceOf(await backendOn(redis.url), 'w', TTL_MS)).why).toBe('lost');
  });

  it('whose marker names another server (a restart with persistence, a failover): fenced as lost, as always', async () => {
    const redis = await server();
    const direct = client(redis.url);
    await upFor(direct, TTL_MS);
    await direct.hset(MARKER, 'run_id', 'another-server', 'fenced_until', 0, 'fence', 'new');
    const fence = await fenceOf(await backendOn(redis.url), 'w', 5_000);
    expect(fence.why).toBe('lost');
    expect(fence.retryAfterMs).toBeGreaterThan(4_000);
  });
});

describe("markNewStore (`longrun store mark`'s function)", () => {
  it('marks a fresh server: its first lock is granted at once though it is not a lease TTL old; marking again says so', async () => {
    const redis = await server();
    const first = await markNewStore(parseRedisUrl(redis.url));
    expect(first).toEqual({ outcome: 'marked', redis: redis.url, primaries: [{ primary: `127.0.0.1:${redis.port}`, state: 'marked' }] });
    expect((await markNewStore(parseRedisUrl(redis.url))).primaries).toEqual([{ primary: `127.0.0.1:${redis.port}`, state: 'already' }]);
    const backend = await backendOn(redis.url);
    expect(await backend.acquire('w', 'a', 60_000)).toBe(true);
  });

  it('lifts a new store’s fence (the operator vouches that it is new)', async () => {
    const redis = await server();
    const backend = await backendOn(redis.url);
    expect((await fenceOf(backend, 'w', 60_000)).why).toBe('new');
    expect((await markNewStore(parseRedisUrl(redis.url))).outcome).toBe('marked');
    expect(await backend.acquire('w', 'a', 60_000)).toBe(true);
  });

  it.each([
    ['Workhorse (and longrun by default)', 'workhorse:duoworkflow:lock:42'],
    ['longrun on a Redis Cluster', 'longrun:{wf:42}:lock'],
  ])('refuses a store holding a lock key of %s, changing nothing', async (_scheme, key) => {
    const redis = await server();
    const direct = client(redis.url);
    await direct.set(key, 'token');
    expect(await markNewStore(parseRedisUrl(redis.url))).toEqual({
      outcome: 'refused',
      redis: redis.url,
      primaries: [{ primary: `127.0.0.1:${redis.port}`, state: 'lock_keys', lockKeys: 1, example: key }],
    });
    expect(await direct.exists(MARKER)).toBe(0);
  });

  it('refuses a store that lost its data (a lost fence up, or a marker naming another server) and a promoted replica without a marker', async () => {
    const redis = await server();
    const direct = client(redis.url);
    await direct.hset(MARKER, 'run_id', 'another-server', 'fenced_until', 0);
    expect((await markNewStore(parseRedisUrl(redis.url))).primaries).toEqual([{ primary: `127.0.0.1:${redis.port}`, state: 'lost', fenceLeftMs: 0 }]);
    const backend = await backendOn(redis.url);
    await fenceOf(backend, 'w', 60_000);
    const refused = await markNewStore(parseRedisUrl(redis.url));
    expect(refused.outcome).toBe('refused');
    expect(refused.primaries[0]?.fenceLeftMs).toBeGreaterThan(50_000);
    expect(await direct.hget(MARKER, 'fence')).toBe('lost');

    const promoted = await server();
    await client(promoted.url).call('REPLICAOF', '127.0.0.1', String(redis.port));
    await client(promoted.url).call('REPLICAOF', 'NO', 'ONE');
    await client(promoted.url).flushall();
    expect((await markNewStore(parseRedisUrl(promoted.url))).primaries).toEqual([{ primary: `127.0.0.1:${promoted.port}`, state: 'promoted' }]);
  });
});
