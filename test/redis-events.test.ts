/**
 * The coordination store's connection events are seen, not swallowed: a Redis that goes
 * away and comes back shows in the metrics (every event counted) and in the log (each
 * kind of event at most once per interval, with what was held back).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedis, type RedisServer } from './helpers/redis';
import { metricValue, startStack, type Stack } from './helpers/stack';

let stack: Stack | undefined;
let redis: RedisServer | undefined;

afterEach(async () => {
  await stack?.close();
  stack = undefined;
  await redis?.stop();
  redis = undefined;
});

const events = (text: string, connection: string, event: string): number =>
  metricValue(text, 'longrun_redis_connection_events_total', { connection, event }) ?? -1;

describe('Redis connection events', () => {
  it('are counted and logged (rate-limited) while Redis is down, and its return is seen', async () => {
    redis = await startRedis();
    stack = await startStack({ redisUrl: redis.url });
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
    const lines = stack
      .logs()
      .split('\n')
      .filter((l) => l.includes('"msg":"redis connection reconnecting"') && l.includes('"connection":"commands"'));
    // One line for the restart and at most one more for the outage: within 10 s a kind is logged once.
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines.length).toBeLessThanOrEqual(2);
    expect(JSON.parse(lines[0] as string)).toMatchObject({ level: 'warn', connection: 'commands', event: 'reconnecting', suppressed: 0 });
  });
});
