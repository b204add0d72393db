/**
 * Every Redis connection longrun opens is made here — coordination's, the follow log's, the
 * bridge inboxes', `longrun store mark`'s: ioredis clients for a RedisTarget
 * (LONGRUN_REDIS_URL): one server from its URL, the primary that Sentinel names, followed
 * across failovers by ioredis's own Sentinel support, or a Redis Cluster (ioredis Cluster:
 * commands go to the primary serving their first key's slot, MOVED and ASK redirections are
 * followed, the slot map is refreshed every 5 s and on every redirection, so a failover is
 * followed within seconds).
 *
 * A demoted primary is the danger in Sentinel mode: after a failover the old primary
 * keeps answering as a writable primary until Sentinel reconfigures it (about ten
 * seconds with Redis 7.0's Sentinel), so a lease renewed there is silently lost
 * while a fresh connection takes the lock on the new primary — two runs of one
 * workflow. Hence `failoverDetector`: both connections subscribe to `+switch-master` on
 * the Sentinels and reconnect through them the moment it is announced; the role check
 * on every (re)connect refuses a node that is not the primary; and a READONLY reply
 * (a demotion the detector missed) forces a reconnect as well.
 */
import Redis, { Cluster, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { ClusterRedisTarget, RedisTarget, SentinelRedisTarget } from './url';

/** A client of either kind: one server (standalone or Sentinel's primary), or a whole Cluster. */
export type RedisClient = Redis | Cluster;

/**
 * `commands`: fails fast while Redis is unreachable (locks, leases, appends, sends).
 * `subscriber`: queues until connected, for SUBSCRIBE and blocking reads (a connection of its own).
 */
export type ConnectionRole = 'commands' | 'subscriber';

export interface ConnectionSettings {
  /** Per-command deadline of the command connection. */
  commandTimeoutMs: number;
  /** Deadline of connecting (both connections). */
  connectTimeoutMs: number;
}

// Keep reconnecting (capped backoff): Redis coming back, or a new primary, must heal the gateway.
const retryStrategy = (times: number): number => Math.min(50 * times, 1_000);

function roleOptions(role: ConnectionRole, settings: ConnectionSettings): RedisOptions {
  if (role === 'subscriber') {
    // Queues its SUBSCRIBEs until connected and re-subscribes on every reconnect.
    return { connectTimeout: settings.connectTimeoutMs, retryStrategy, maxRetriesPerRequest: null };
  }
  return {
    // Fail fast when Redis is unreachable: a detached execute answers 503 at once.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: settings.commandTimeoutMs,
    connectTimeout: settings.connectTimeoutMs,
    enableAutoPipelining: true,
    retryStrategy,
  };
}

/** The ioredis options that reach the primary of `target` through its Sentinels. */
export function sentinelOptions(target: SentinelRedisTarget): RedisOptions {
  return {
    sentinels: target.sentinels.map(({ host, port }) => ({ host, port })),
    name: target.masterName,
    role: 'master',
    db: target.db,
    ...(target.username !== undefined ? { username: target.username } : {}),
    ...(target.password !== undefined ? { password: target.password } : {}),
    ...(target.sentinelUsername !== undefined ? { sentinelUsername: target.sentinelUsername } : {}),
    ...(target.sentinelPassword !== undefined ? { sentinelPassword: target.sentinelPassword } : {}),
    failoverDetector: true,
    // The detector's Sentinel connections: back within seconds (ioredis waits a minute).
    sentinelReconnectStrategy: (times: number) => Math.min(500 * times, 5_000),
    // A Sentinel that accepts the connection but does not answer: ask the next one.
    sentinelCommandTimeout: 1_000,
    // Every Sentinel failed: start over from the first soon.
    sentinelRetryStrategy: (times: number) => Math.min(100 * times, 1_000),
    // A write refused as READONLY went to a replica (a demotion the detector missed):
    // reconnect, which asks the Sentinels for the primary again.
    reconnectOnError: (err: Error) => (/\bREADONLY\b/.test(err.message) ? 1 : false),
    ...(target.tls ? { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
  };
}

/** Every option longrun gives ioredis for this target and connection (what a test can inspect). */
export function redisOptions(target: Exclude<RedisTarget, ClusterRedisTarget>, role: ConnectionRole, settings: ConnectionSettings): RedisOptions {
  return target.mode === 'sentinel' ? { ...sentinelOptions(target), ...roleOptions(role, settings) } : roleOptions(role, settings);
}

/** The ioredis Cluster options for a cluster target and connection. */
export function clusterOptions(target: ClusterRedisTarget, role: ConnectionRole, settings: ConnectionSettings): ClusterOptions {
  const commands = role === 'commands';
  return {
    // Reads and writes on primaries only: a replica's copy of a lock may lag.
    scaleReads: 'master',
    // The command connection fails fast while no primary answers (503 LOCK_UNAVAILABLE);
    // the subscriber queues its SUBSCRIBEs until it is connected.
    enableOfflineQueue: !commands,
    enableAutoPipelining: commands,
    // Keep looking for the cluster (capped backoff), as the single-server client does.
    clusterRetryStrategy: retryStrategy,
    // A primary that went away: retry on the refreshed slot map after 100 ms, at most 16
    // redirections (ioredis's defaults), all within the per-command timeout.
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    slotsRefreshTimeout: settings.connectTimeoutMs,
    redisOptions: {
      ...(target.username !== undefined ? { username: target.username } : {}),
      ...(target.password !== undefined ? { password: target.password } : {}),
      ...(target.tls ? { tls: {} } : {}),
      connectTimeout: settings.connectTimeoutMs,
      ...(commands ? { commandTimeout: settings.commandTimeoutMs, maxRetriesPerRequest: 1 } : { maxRetriesPerRequest: null }),
    },
  };
}

/** A client for `target`, connecting at once. Attach an 'error' listener (ioredis prints unheard errors). */
export function createRedis(target: RedisTarget, role: ConnectionRole, settings: ConnectionSettings): RedisClient {
  if (target.mode === 'cluster')
    return new Cluster(
      target.nodes.map(({ host, port }) => ({ host, port })),
      clusterOptions(target, role, settings),
    );
  const options = redisOptions(target, role, settings);
  return target.mode === 'standalone' ? new Redis(target.url, options) : new Redis(options);
}

/**
 * Closes a client for good: QUIT (bounded: a client still looking for a primary never
 * answers), then disconnect(), which also ends what QUIT leaves open — a pending
 * reconnect and the failover detector's Sentinel connections.
 */
export async function closeRedis(redis: RedisClient, quitTimeoutMs = 1_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    redis.quit().catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, quitTimeoutMs);
    }),
  ]);
  clearTimeout(timer);
  redis.disconnect();
}

/** Resolves true once `client` is ready, or false after `timeoutMs`; the listener is removed either way. */
export function whenReady(client: RedisClient, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ok);
    };
    const onReady = (): void => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    client.on('ready', onReady);
  });
}

/** The `host:port` a single-server client is connected to (Sentinel's primary included), or undefined while it is not. */
export function connectedAddress(client: Redis): string | undefined {
  const { remoteAddress, remotePort } = (client as { stream?: { remoteAddress?: string; remotePort?: number } }).stream ?? {};
  return remoteAddress ? `${remoteAddress}:${remotePort}` : undefined;
}
