/**
 * The redis-server test helper: a real server on a free loopback port that stops,
 * restarts on the same port with no data kept, and leaves no process behind.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import net from 'node:net';
import { Redis } from 'ioredis';
import { freePort } from '../../stack/ports';
import { startRedis, type RedisServer } from '../../stack/redis-server';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

describe('freePort', () => {
  it('returns a loopback port nobody listens on', async () => {
    const port = await freePort();
    expect(port).toBeGreaterThan(0);
    expect(await refusesConnections(port)).toBe(true);
  });
});

describe('startRedis', () => {
  let server: RedisServer | undefined;
  const clients: Redis[] = [];

  function client(url: string): Redis {
    const redis = new Redis(url, { maxRetriesPerRequest: 1, retryStrategy: (times) => (times > 50 ? null : 20), lazyConnect: false });
    // Connection errors while the server restarts are expected; ioredis retries.
    redis.on('error', () => undefined);
    clients.push(redis);
    return redis;
  }

  afterEach(async () => {
    for (const redis of clients.splice(0)) redis.disconnect();
    await server?.stop();
    server = undefined;
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('starts a server that answers on its URL', async () => {
    server = await startRedis();
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
    const redis = client(server.url);
    expect(await redis.ping()).toBe('PONG');
    await redis.set('k', 'v');
    expect(await redis.get('k')).toBe('v');
    // Nothing is persisted.
    expect(await redis.config('GET', 'save')).toEqual(['save', '']);
    expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
  });

  it('stop() kills the process and frees the port; a second stop() is harmless', async () => {
    server = await startRedis();
    const pid = server.pid;
    expect(pid).toBeDefined();
    await server.stop();
    expect(alive(pid as number)).toBe(false);
    expect(await refusesConnections(server.port)).toBe(true);
    await server.stop();
  });

  it('restart() comes back on the same port, empty, and a client reconnects', async () => {
    server = await startRedis();
    const redis = client(server.url);
    await redis.set('before', '1');
    const firstPid = server.pid;
    await server.restart();
    expect(server.pid).not.toBe(firstPid);
    expect(alive(firstPid as number)).toBe(false);
    expect(await redis.ping()).toBe('PONG');
    expect(await redis.get('before')).toBeNull();
  });

  it('two servers run side by side on different ports', async () => {
    server = await startRedis();
    const other = await startRedis();
    try {
      expect(other.port).not.toBe(server.port);
      expect(await client(other.url).ping()).toBe('PONG');
    } finally {
      await other.stop();
    }
  });
});
