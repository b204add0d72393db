/**
 * A gateway beside a Redis as operators give it one (docs/spec.md §5): a new Redis, unmarked,
 * serves at once once it is older than a lease TTL; a younger one (a stack started
 * together, a restart) is fenced, says so in the 503, the 1013, the log and the gauge, and
 * @longrun/client's execute and session wait it out within their bound; and the start-up
 * check of maxmemory-policy. Real redis-servers, the gateway in-process, short lease TTLs.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import { LongrunClient, LongrunError, LongrunSession, type SessionClose, type SessionEvent } from '@longrun/client';
import { scenarioMetadata } from '../../sandbox/scenario';
import { startRedis, type RedisServer, type RedisServerOptions } from '../../stack/redis-server';
import { metricValue, startStack, type Stack } from '../../stack';
import { openSession, start } from '../helpers/ws-session';

const cleanup: Array<() => Promise<unknown> | unknown> = [];
const sockets: WebSocket[] = [];
afterEach(async () => {
  for (const ws of sockets.splice(0)) ws.terminate();
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function redisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const server = await startRedis({ mark: false, ...options });
  cleanup.push(() => server.stop());
  return server;
}

async function stackOn(redisUrl: string, leaseTtlMs: number): Promise<Stack> {
  const stack = await startStack({ redis: { url: redisUrl }, preauth: { detached: true, lockConcurrentFlow: true }, env: { LONGRUN_LEASE_TTL_MS: String(leaseTtlMs) } });
  cleanup.push(() => stack.close());
  return stack;
}

/** Resolves once the server at `url` has been up at least `ms`. */
async function upFor(url: string, ms: number): Promise<void> {
  const redis = new Redis(url);
  redis.on('error', () => undefined);
  try {
    await expect.poll(async () => Number(/uptime_in_seconds:(\d+)/.exec(await redis.info('server'))?.[1]) * 1_000 >= ms, { timeout: ms + 3_000, interval: 100 }).toBe(true);
  } finally {
    redis.disconnect();
  }
}

const body = JSON.stringify({ goal: 'g', workflowMetadata: scenarioMetadata([{ op: 'checkpoint', text: 'working' }, { op: 'end' }]) });
const steps = [{ op: 'checkpoint' as const, text: 'hello' }, { op: 'end' as const }];
const wsUrl = (stack: Stack): string => `${stack.url.replace('http', 'ws')}/api/v4/ai/duo_workflows/ws`;
const fenceGauge = (metrics: string, port: number): number | undefined => metricValue(metrics, 'longrun_redis_store_fence_seconds', { primary: `127.0.0.1:${port}` });

describe('a new Redis, unmarked', () => {
  it('up longer than a lease TTL: the first execute is accepted (202) and the first WebSocket start runs (no 1013); no fence is logged, the gauge says 0', async () => {
    const ttlMs = 1_000;
    const redis = await redisServer();
    await upFor(redis.url, ttlMs);
    const stack = await stackOn(redis.url, ttlMs);
    const res = await stack.executeText('new-1', { rawBody: body });
    expect(res.status).toBe(202);
    const session = await openSession(stack.url, sockets);
    session.send(start('new-ws', steps));
    expect(await session.next('newCheckpoint')).toBeDefined();
    expect((await session.closed).code).toBe(1000);
    expect(stack.logs()).not.toContain('the lock store is new');
    expect(fenceGauge(await stack.metrics(), redis.port)).toBe(0);
  });

  it('younger than a lease TTL: the 503 says "new" (body `fence`, Retry-After), the WebSocket start is closed 1013 saying so, the log says it once, the gauge counts down; served once the Redis is a TTL old', async () => {
    const ttlMs = 5_000; // long enough for the gateway to start and ask before it ends, on a loaded machine
    const redis = await redisServer();
    const stack = await stackOn(redis.url, ttlMs);
    const res = await stack.executeText('young-1', { rawBody: body });
    expect(res.status).toBe(503);
    const retryAfterS = Number(res.headers['retry-after']);
    expect(retryAfterS).toBeGreaterThanOrEqual(1);
    expect(retryAfterS).toBeLessThanOrEqual(5);
    expect(JSON.parse(res.text)).toEqual({
      error: {
        code: 'LOCK_UNAVAILABLE',
        retryable: true,
        fence: 'new',
        message: `the workflow lock store is new (no longrun marker): fenced until it is 5 s old, retry in ${retryAfterS} s`,
      },
    });
    const session = await openSession(stack.url, sockets);
    session.send(start('young-ws', steps));
    const closed = await session.closed;
    expect(closed.code).toBe(1013);
    expect(closed.reason).toMatch(/^the workflow lock store is new \(no longrun marker\): fenced until it is 5 s old, retry in \d s$/);
    expect(stack.logs().match(/the lock store is new/g)).toHaveLength(1);
    expect(stack.logs()).not.toContain('lost its data');
    const gauge = fenceGauge(await stack.metrics(), redis.port) as number;
    expect(gauge).toBeGreaterThan(0);
    expect(gauge).toBeLessThanOrEqual(5);
    await sleep(gauge * 1_000 + 100);
    expect(fenceGauge(await stack.metrics(), redis.port)).toBe(0);
    expect((await stack.executeText('young-1', { rawBody: body })).status).toBe(202);
  });
});

describe('@longrun/client waits a fenced start out', () => {
  const ttlMs = 5_000; // long enough for the gateway to be back on the restarted Redis before its fence ends

  /** A stack on a marked Redis, restarted empty (no run in flight): fenced until it is a TTL old. */
  async function restarted(): Promise<{ stack: Stack; redis: RedisServer }> {
    const redis = await redisServer({ mark: true });
    const stack = await stackOn(redis.url, ttlMs);
    expect((await stack.executeText('before', { rawBody: body })).status).toBe(202);
    await redis.restart();
    // Back and fenced (while it is away, the 503 is the plain one: Redis unreachable).
    await expect
      .poll(async () => (JSON.parse((await stack.executeText('probe', { rawBody: body })).text) as { error?: { fence?: string } }).error?.fence, { timeout: 5_000, interval: 50 })
      .toBe('new');
    return { stack, redis };
  }

  it('execute: retried by its Retry-After to success within the bound; past the bound, the 503 with its fence', async () => {
    const { stack } = await restarted();
    const patient = new LongrunClient({ url: stack.url });
    cleanup.push(() => patient.close());
    const hasty = new LongrunClient({ url: stack.url, retry: { deadlineMs: 200, storeFenceWaitMs: 200 } });
    cleanup.push(() => hasty.close());
    const refused = await hasty.execute('hasty', { goal: 'g' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LongrunError);
    expect(refused).toMatchObject({ code: 'LOCK_UNAVAILABLE', status: 503, fence: 'new', attempts: 1 });
    expect((refused as LongrunError).retryAfterS).toBeGreaterThanOrEqual(1);
    const startedAt = Date.now();
    const result = await patient.execute('patient', { goal: 'g', workflowMetadata: { scenario: [{ op: 'checkpoint', text: 'working' }, { op: 'end' }] } });
    expect(result).toMatchObject({ kind: 'accepted', workflowId: 'patient' });
    expect(result.attempts).toBeGreaterThanOrEqual(2);
    expect(Date.now() - startedAt).toBeLessThan(ttlMs * 1.2 + 1_000);
  });

  it('session: the 1013 of the fence is sent again when it says, and the run starts', async () => {
    const { stack } = await restarted();
    const events: SessionEvent[] = [];
    const checkpoints: string[] = [];
    let closed!: (close: SessionClose) => void;
    const ended = new Promise<SessionClose>((resolve) => (closed = resolve));
    const session = new LongrunSession({
      url: wsUrl(stack),
      onAction: () => undefined,
      onCheckpoint: (c) => checkpoints.push(c.checkpoint),
      onEvent: (e) => events.push(e),
      onClose: closed,
    });
    cleanup.push(() => session.close());
    await session.start({ workflowID: 'waits', goal: 'g', workflowMetadata: scenarioMetadata(steps) });
    expect(await ended).toMatchObject({ code: 1000, how: 'closed' });
    expect(checkpoints).toEqual(['hello']);
    expect(events.filter((e) => e.kind === 'fenced')).not.toHaveLength(0);
    expect(events.find((e) => e.kind === 'fenced')).toMatchObject({ kind: 'fenced', fence: 'new' });
  });

  it('session past its bound: ends gave_up with the fence’s 1013', async () => {
    const { stack } = await restarted();
    let closed!: (close: SessionClose) => void;
    const ended = new Promise<SessionClose>((resolve) => (closed = resolve));
    const session = new LongrunSession({ url: wsUrl(stack), storeFenceWaitMs: 100, onAction: () => undefined, onClose: closed });
    cleanup.push(() => session.close());
    await session.start({ workflowID: 'gives-up', goal: 'g', workflowMetadata: scenarioMetadata(steps) });
    const close = await ended;
    expect(close).toMatchObject({ code: 1013, how: 'gave_up' });
    expect(close.reason).toMatch(/^the workflow lock store is new .*retry in \d s$/);
  });
});

describe('Redis checked at start (maxmemory-policy)', () => {
  const policyOf = (metrics: string, policy: string): number | undefined => metricValue(metrics, 'longrun_redis_maxmemory_policy_info', { policy });

  it('noeviction: no warning, the metric says noeviction', async () => {
    const redis = await redisServer({ mark: true });
    const stack = await stackOn(redis.url, 60_000);
    expect(policyOf(await stack.metrics(), 'noeviction')).toBe(1);
    expect(stack.logs()).not.toContain('maxmemory-policy');
  });

  it('allkeys-lru: a warning at start saying what to set and why, and the metric says allkeys-lru — CONFIG renamed away or not (INFO is read)', async () => {
    for (const args of [
      ['--maxmemory-policy', 'allkeys-lru'],
      ['--maxmemory-policy', 'allkeys-lru', '--rename-command', 'CONFIG', ''],
    ]) {
      const redis = await redisServer({ mark: true, args });
      const stack = await stackOn(redis.url, 60_000);
      const warning = stack
        .logs()
        .split('\n')
        .filter((line) => line.includes('maxmemory-policy'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(warning).toEqual([
        expect.objectContaining({
          level: 'warn',
          maxmemory_policy: 'allkeys-lru',
          primary: `127.0.0.1:${redis.port}`,
          msg: expect.stringMatching(/maxmemory-policy is allkeys-lru, not noeviction: .*evict a workflow's lock key.*set maxmemory-policy noeviction/),
        }),
      ]);
      const metrics = await stack.metrics();
      expect(policyOf(metrics, 'allkeys-lru')).toBe(1);
      expect(policyOf(metrics, 'noeviction')).toBeUndefined();
    }
  });

  it('INFO refused (an ACL without it): the check says it was skipped, and the metric says unknown', async () => {
    const redis = await redisServer({ mark: true, args: ['--user', 'longrun', 'on', '>secret', '~*', '&*', '+@all', '-info'] });
    const stack = await stackOn(redis.url.replace('redis://', 'redis://longrun:secret@'), 60_000);
    expect(stack.logs()).toMatch(/"maxmemory_policy":"unknown".*maxmemory-policy check skipped: it could not be read \(NOPERM/);
    expect(policyOf(await stack.metrics(), 'unknown')).toBe(1);
  });
});
