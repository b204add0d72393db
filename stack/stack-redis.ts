/**
 * The Redis a stack's gateways coordinate through: none (in-process coordination), a
 * redis-server of the stack's own, one the caller runs, or a Sentinel or Cluster topology
 * the stack starts (redis-sentinel.ts, redis-cluster.ts). What the stack starts, it stops.
 */
import { Redis } from 'ioredis';
import { resume, startRedis, type RedisServer, type RedisServerOptions } from './redis-server';
import { startRedisCluster, type RedisClusterTopology } from './redis-cluster';
import { startSentinelTopology, type SentinelTopology, type SentinelTopologyOptions } from './redis-sentinel';

export type StackRedis =
  /** No Redis: the gateways coordinate in process (the default). */
  | 'none'
  /** A fresh redis-server of the stack's own, marked as a new store, with a client on it. */
  | 'own'
  | { own: RedisServerOptions }
  /** A Redis the caller runs and stops (a RedisServer fits); `pid`, when known, is metered by cpu(). */
  | { url: string; pid?: number }
  /** A primary, a replica and three Sentinels of the stack's own. */
  | { sentinel: SentinelTopologyOptions }
  /** A Redis Cluster of the stack's own (LONGRUN_REDIS_KEYS=cluster for its gateways). */
  | { cluster: true };

export interface StackRedisParts {
  /** LONGRUN_REDIS_URL (and with a Cluster, LONGRUN_REDIS_KEYS) for every gateway. */
  env: Record<string, string>;
  url?: string;
  /** The redis-server's pid now (a restart changes it), when known. */
  pid(): number | undefined;
  /** The stack's own redis-server, and a client on it (errors ignored). */
  server?: RedisServer;
  client?: Redis;
  sentinel?: SentinelTopology;
  cluster?: RedisClusterTopology;
  /** Stops what was started here (a server paused with SIGSTOP is resumed first); idempotent. */
  close(): Promise<void>;
}

export async function startStackRedis(choice: StackRedis): Promise<StackRedisParts> {
  if (choice === 'none') return { env: {}, pid: () => undefined, close: async () => undefined };
  if (choice === 'own' || 'own' in choice) {
    const server = await startRedis(choice === 'own' ? {} : choice.own);
    const client = new Redis(server.url);
    client.on('error', () => undefined);
    let closing: Promise<void> | undefined;
    const close = (): Promise<void> =>
      (closing ??= (async () => {
        client.disconnect();
        resume(server);
        await server.stop();
      })());
    return { env: { LONGRUN_REDIS_URL: server.url }, url: server.url, server, client, pid: () => server.pid, close };
  }
  if ('url' in choice) return { env: { LONGRUN_REDIS_URL: choice.url }, url: choice.url, pid: () => choice.pid, close: async () => undefined };
  if ('sentinel' in choice) {
    const sentinel = await startSentinelTopology(choice.sentinel);
    return { env: { LONGRUN_REDIS_URL: sentinel.url }, url: sentinel.url, sentinel, pid: () => undefined, close: () => sentinel.stop() };
  }
  const cluster = await startRedisCluster();
  return { env: { LONGRUN_REDIS_URL: cluster.url, LONGRUN_REDIS_KEYS: 'cluster' }, url: cluster.url, cluster, pid: () => undefined, close: () => cluster.stop() };
}
