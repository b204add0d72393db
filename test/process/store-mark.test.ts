/**
 * `longrun store mark` as operators run it: the built executable (`node dist/src/main.js store
 * mark`, what package.json's bin and the image's /usr/local/bin/longrun run) with
 * LONGRUN_REDIS_URL, against real redis-servers. It marks a new Redis, after which the first
 * execute is accepted at once though the server is younger than a lease TTL; it refuses a
 * store holding a lock key; it exits non-zero with a clear message on a bad URL or a Redis it
 * cannot reach. (Through Sentinel and on a Cluster: sentinel.test.ts, redis-cluster.test.ts.)
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { lockKey } from '../../src/redis/keys';
import { scenarioMetadata } from '../../sandbox/scenario';
import { startChild } from '../../stack/child';
import { freePort, holdPort } from '../../stack/ports';
import { startRedis, type RedisServer } from '../../stack/redis-server';
import { startStack } from '../../stack';
import { MAIN, storeMark } from '../helpers/store-mark';

const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function freshRedis(): Promise<RedisServer> {
  const redis = await startRedis({ mark: false });
  cleanup.push(() => redis.stop());
  return redis;
}

describe('longrun store mark', () => {
  it('marks a new Redis (exit 0, says so): the first execute is then accepted at once, though the server is younger than a lease TTL; run again, it says it was marked already', async () => {
    const redis = await freshRedis();
    const marked = await storeMark({ LONGRUN_REDIS_URL: redis.url });
    expect(marked).toEqual({
      status: 0,
      stdout: `longrun store mark: ${redis.url} is marked as a new store: gateways grant its first locks at once\n  127.0.0.1:${redis.port}  marked\n`,
      stderr: '',
    });
    const stack = await startStack({ redis: { url: redis.url }, preauth: { detached: true }, env: { LONGRUN_LEASE_TTL_MS: '60000' } });
    cleanup.push(() => stack.close());
    const res = await stack.executeText('marked-1', {
      rawBody: JSON.stringify({ goal: 'g', workflowMetadata: scenarioMetadata([{ op: 'checkpoint', text: 'x' }, { op: 'end' }]) }),
    });
    expect(res.status).toBe(202);
    const again = await storeMark({ LONGRUN_REDIS_URL: redis.url });
    expect(again.status).toBe(0);
    expect(again.stdout).toContain('was marked already');
  });

  it('refuses a store holding a lock key (exit 3, what it found, nothing changed)', async () => {
    const redis = await freshRedis();
    const client = new Redis(redis.url);
    cleanup.push(() => client.disconnect());
    await client.set(lockKey('held-elsewhere'), 'token');
    const refused = await storeMark({ LONGRUN_REDIS_URL: redis.url });
    expect(refused.status).toBe(3);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(
      `longrun store mark: refused, nothing was changed: ${redis.url} may have served a fleet, and only the store fence can tell a store that lost its data from a new one\n` +
        `  127.0.0.1:${redis.port}  holds 1 lock key (workhorse:duoworkflow:lock:held-elsewhere)\n`,
    );
    expect(await client.exists('longrun:store')).toBe(0);
  });

  it('exits 1 with a clear message: a bad URL (its password masked), a Redis it cannot reach, no URL at all', async () => {
    const bad = await storeMark({ LONGRUN_REDIS_URL: 'redis+sentinel://:hunter2@127.0.0.1:26379' });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/^longrun store mark: invalid LONGRUN_REDIS_URL: .*the master name is missing/);
    expect(bad.stderr).not.toContain('hunter2');
    // A port that resets every connection, as a dead host's does.
    const port = await freePort();
    const dead = await holdPort(port);
    cleanup.push(() => dead.close());
    const unreachable = await storeMark({ LONGRUN_REDIS_URL: `redis://:hunter2@127.0.0.1:${port}`, LONGRUN_REDIS_CONNECT_TIMEOUT_MS: '300' });
    expect(unreachable.status).toBe(1);
    expect(unreachable.stderr).toMatch(new RegExp(`^longrun store mark: cannot reach Redis at redis://:\\*\\*\\*@127\\.0\\.0\\.1:${port}: `));
    expect(unreachable.stderr).not.toContain('hunter2');
    const none = await storeMark({});
    expect(none).toMatchObject({ status: 1, stderr: expect.stringContaining('LONGRUN_REDIS_URL is not set') });
  });

  it('an unknown command is a usage error (exit 2), naming the commands there are', async () => {
    const child = startChild([MAIN, 'store', 'unmark'], {});
    cleanup.push(() => child.kill());
    expect(await child.exited(20_000)).toBe(2);
    expect(child.stderr()).toMatch(/^longrun: unknown command: store unmark\nusage: longrun .*\n\s+longrun store mark /);
  });
});
