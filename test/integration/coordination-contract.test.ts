/**
 * One contract, two coordination backends (docs/spec.md §5): the in-process one and Redis (a real
 * redis-server) must behave alike, so the same suite (helpers/coordination-contract.ts) runs against both — locks, leases
 * (one at a time and batched), stop keys and notices, run records, actor slots, batched
 * releases, expiry (real time, short TTLs). test/process/redis-cluster.test.ts runs it
 * against a Redis Cluster too.
 */
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { CoordinationBackend } from '../../src/coordination/backend';
import { MemoryBackend } from '../../src/coordination/memory-backend';
import { RedisBackend } from '../../src/coordination/redis-backend';
import { parseRedisUrl } from '../../src/redis/url';
import { coordinationContract } from '../helpers/coordination-contract';
import { startRedis, type RedisServer } from '../../stack/redis-server';

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

describe.each(backends)('coordination backend contract: %s', (kind, make) => {
  coordinationContract(kind, make);
});
