/**
 * The coordination store's connection events are seen, not swallowed: a Redis that goes
 * away and comes back shows in the metrics (every event counted) and in the log (each
 * outage once, however many reconnect attempts it takes, and each reconnection).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedis, type RedisServer } from '../../stack/redis-server';
import { metricValue, startStack, type Stack } from '../../stack';

let stack: Stack | undefined;
let redis: RedisServer | undefined;

afterEach(async () => {
  await stack?.close();
  stack = undefined;
  await redis?.stop();
  redis = undefined;
});

const events = (text: string, connection: string, event: string): number => metricValue(text, 'longrun_redis_connection_events_total', { connection, event }) ?? -1;

describe('Redis connection events', () => {
  it('are counted and logged (once per outage) while Redis is down, and its return is seen', async () => {
    redis = await startRedis();
    stack = await startStack({ redis: { url: redis.url } });
    let metrics = await stack.metrics();
    expect(events(metrics, 'commands', 'ready')).toBe(1);
    expect(events(metrics, 'subscriber', 'ready')).toBe(1);
    expect(events(metrics, 'commands', 'reconnecting')).toBe(0);

    await redis.restart();
    // Down for a moment, then back: the clients reconnect (capped backoff) and are ready again.
    await expect.poll(async () => events(await stack!.metrics(), 'commands', 'ready'), { timeout: 10_000 }).toBe(2);
    await expect.poll(async () => events(await stack!.metrics(), 'subscriber', 'ready'), { timeout: 10_000 }).toBe(2);
    metrics = await stack.metrics();
    expect(events(metrics, 'commands', 'reconnecting')).toBeGreaterThanOrEqual(1);

    // Stopped for good: reconnect attempts repeat every second at most, the log says so once.
    await redis.stop();
    await sleep(2_500);
    metrics = await stack.metrics();
    expect(events(metrics, 'commands', 'reconnecting')).toBeGreaterThanOrEqual(3);
    const lines = (msg: string): Array<Record<string, unknown>> =>
      stack!
        .logs()
        .split('\n')
        .filter((l) => l.includes(`"msg":"${msg}`))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    // Two outages (the restart, then the stop): one line each, however many attempts.
    const lost = lines('redis connection lost');
    expect(lost).toHaveLength(2);
    expect(lost[0]).toMatchObject({ level: 'warn', redis: redis.url });
    expect(lines('redis reconnected')).toHaveLength(1);
  });
});
