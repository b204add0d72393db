/**
 * A throwaway redis-server for the demo (when REDIS_URL is not given): on a free loopback
 * port, nothing persisted, stopped and removed on stop().
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { markNewStore } from '../../src/coordination/store-mark';
import { parseRedisUrl } from '../../src/redis/url';

export interface LocalRedis {
  url: string;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export async function startLocalRedis(): Promise<LocalRedis> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'longrun-example-redis-'));
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
  const kill = (): void => void child.kill('SIGKILL');
  process.once('exit', kill);
  const stop = async (): Promise<void> => {
    process.off('exit', kill);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => undefined);
  for (let tries = 0; ; tries++) {
    if (child.exitCode !== null || child.pid === undefined) {
      await stop();
      throw new Error('redis-server did not start (is it installed? apt-get install redis-server), or set REDIS_URL');
    }
    const ok = await probe.connect().then(
      () => probe.ping().then(() => true),
      () => false,
    );
    if (ok) break;
    if (tries > 100) {
      await stop();
      throw new Error(`redis-server on port ${port} did not answer`);
    }
    await sleep(50);
  }
  probe.disconnect();
  // Just made, so known to be new: marked as `longrun store mark` does, or the gateway's
  // first locks wait until it is one lease TTL old (the store fence).
  const marked = await markNewStore(parseRedisUrl(url));
  if (marked.outcome !== 'marked') {
    await stop();
    throw new Error(`could not mark the new redis-server as a new store: ${JSON.stringify(marked.primaries)}`);
  }
  return { url, stop };
}
