/**
 * What batching saves, counted by Redis itself (INFO commandstats on a real redis-server):
 * 500 leases held by one LeaseKeeper with a short lease renew in one script call per
 * keeper tick — tens of calls where one renewal each would be thousands — every lease
 * stays held; releasing them all at once is one call per BATCH_LEASES locks.
 */
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseKeeper } from '../../src/coordination/lease-keeper';
import { BATCH_LEASES, RedisBackend } from '../../src/coordination/redis-backend';
import { lockKey } from '../../src/redis/keys';
import { parseRedisUrl } from '../../src/redis/url';
import { startRedis, type RedisServer } from '../../stack/redis-server';

const LEASES = 500;
const TTL_MS = 3_000;
const WINDOW_MS = 4_500;

let redis: RedisServer;
let client: Redis;
let backend: RedisBackend;

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
  backend = new RedisBackend(parseRedisUrl(redis.url), { commandTimeoutMs: 2_000, connectTimeoutMs: 2_000 });
  expect(await backend.waitReady(5_000)).toBe(true);
});

afterAll(async () => {
  client.disconnect();
  await backend.close();
  await redis.stop();
});

/** Calls per command since the last CONFIG RESETSTAT, by name. */
async function commandCalls(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const match of (await client.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[match[1] as string] = Number(match[2]);
  return out;
}

describe('batched renewal against a real redis-server', () => {
  it(`${LEASES} held leases (${TTL_MS} ms lease): one script call per keeper tick, not one per renewal; release in one batch`, async () => {
    let ok = 0;
    let late = 0;
    let errors = 0;
    const problems: string[] = [];
    // Renewals still in flight when the release phase starts (the real backend's calls, counted).
    let renewing = 0;
    const renewMany = backend.renewMany.bind(backend);
    backend.renewMany = async (...args) => {
      renewing += 1;
      try {
        return await renewMany(...args);
      } finally {
        renewing -= 1;
      }
    };
    const keeper = new LeaseKeeper(backend, { ttlMs: TTL_MS, onLate: () => (late += 1) });
    const ids = Array.from({ length: LEASES }, (_, i) => `batching-${process.pid}-${i}`);
    const leases = [];
    // Taken over one renewal interval, as runs start: their renewals fall in different ticks.
    for (let i = 0; i < ids.length; i += 50) {
      for (const id of ids.slice(i, i + 50)) {
        const acquiredAt = Date.now();
        expect(await backend.acquire(id, `token-${id}`, TTL_MS)).toBe(true);
        leases.push(
          keeper.hold(
            id,
            { token: `token-${id}`, acquiredAt },
            {
              onLost: (why) => problems.push(`${id} lost (${why})`),
              onStop: (value) => problems.push(`${id} stop ${value}`),
              // A renewal given up on a loaded machine is retried; a lease lost would be a problem.
              onRenew: (result) => (result === 'ok' ? (ok += 1) : (errors += 1)),
              refresh: () => ({ runId: 'run', record: { state: 'running', lastActionAt: '' } }),
            },
          ),
        );
      }
      await sleep(keeper.intervalMs / 10);
    }
    await client.config('RESETSTAT');
    const renewedBefore = ok;
    await sleep(WINDOW_MS);
    const calls = await commandCalls();
    const renewals = ok - renewedBefore;
    const scriptCalls = (calls['evalsha'] ?? 0) + (calls['eval'] ?? 0);
    console.log(
      `${LEASES} leases, ${TTL_MS} ms lease, ${WINDOW_MS} ms: ${renewals} renewals in ${scriptCalls} script calls (${late} late, ${errors} retried); commandstats ${JSON.stringify(calls)}`,
    );
    // Every lease renewed about every TTL/3...
    expect(renewals).toBeGreaterThanOrEqual(LEASES * Math.floor(WINDOW_MS / keeper.intervalMs - 1));
    // ...in at most one call per tick (and per BATCH_LEASES due in it); one per renewal
    // would be `renewals` calls.
    expect(scriptCalls).toBeLessThanOrEqual(Math.ceil(WINDOW_MS / keeper.tickMs) + 2);
    expect(scriptCalls * 20).toBeLessThan(renewals);
    // Nothing else went to Redis from the client: the script's own GET/PEXPIRE/HGET, and the
    // store fence's TIME and INFO (store-fence.lua), are inside those calls.
    expect(Object.keys(calls).filter((name) => !['evalsha', 'eval', 'get', 'pexpire', 'hget', 'time', 'config|resetstat', 'info'].includes(name))).toEqual([]);
    expect(problems).toEqual([]);
    expect(await client.exists(...ids.map(lockKey))).toBe(LEASES);

    // Renewing stops (as at a drain) and what was in flight lands, so Redis counts the releases alone:
    // counting renewals around them raced a renewal's reply against INFO on the other connection.
    keeper.close();
    while (renewing > 0) await sleep(10);
    await client.config('RESETSTAT');
    expect(await Promise.all(leases.map((lease) => lease.release('run')))).toEqual(leases.map(() => true));
    const released = await commandCalls();
    expect((released['evalsha'] ?? 0) + (released['eval'] ?? 0)).toBe(Math.ceil(LEASES / BATCH_LEASES));
    expect(await client.exists(...ids.map(lockKey))).toBe(0);
    expect(keeper.size).toBe(0);
  });
});
