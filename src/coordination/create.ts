/**
 * The coordination part, wired from its settings (docs/spec.md §5): the lock backend (Redis, or
 * this process's memory without it), the lease keeper that renews every run's lease, the stop
 * watcher, and the checks made once at start.
 */
import type { Closables } from '../core/closables';
import type { Logger } from '../core/log';
import type { RedisSettings } from '../redis/settings';
import type { CoordinationBackend } from './backend';
import { LeaseKeeper } from './lease-keeper';
import { MemoryBackend } from './memory-backend';
import type { CoordinationMetrics } from './metrics';
import { RedisBackend } from './redis-backend';
import type { CoordinationDeps } from './run-coordination';
import type { CoordinationSettings } from './settings';
import { StopWatcher } from './stop-watcher';

/** How long Redis may take to answer at start before the gateway serves without it. */
const REDIS_STARTUP_WAIT_MS = 5_000;

export interface CoordinationPartDeps {
  redis: RedisSettings;
  metrics: CoordinationMetrics;
  logger: Logger;
  closables: Closables;
}

function connectBackend(settings: CoordinationSettings, deps: CoordinationPartDeps, onReconnected: () => void): CoordinationBackend {
  const { redis, metrics, logger } = deps;
  if (!redis.target) return new MemoryBackend();
  // The backend logs each outage and each (re)connection once; every event is counted.
  return new RedisBackend(redis.target, {
    commandTimeoutMs: redis.commandTimeoutMs,
    connectTimeoutMs: redis.connectTimeoutMs,
    configureNotifications: settings.configureNotifications,
    logger,
    onEvent: (connection, event) => {
      metrics.redisEvent(connection, event);
      if (connection === 'commands' && event === 'ready') onReconnected();
    },
  });
}

/**
 * Connects the backend and waits (at most REDIS_STARTUP_WAIT_MS) for Redis; a Redis down at
 * start is logged, not fatal. Resolves with what each run's coordination is made with
 * (run-coordination.ts): the backend, the lease keeper, the stop watcher.
 */
export async function createCoordination(settings: CoordinationSettings, deps: CoordinationPartDeps): Promise<CoordinationDeps> {
  const { redis, metrics, logger, closables } = deps;
  let leases: LeaseKeeper | undefined;
  const backend = closables.add(
    'coordination backend',
    // Every lease is renewed as soon as Redis is back (LeaseKeeper.renewAll).
    connectBackend(settings, deps, () => leases?.renewAll()),
    (b) => b.close(),
    (b) => b.destroy(),
  );
  if (backend instanceof RedisBackend) metrics.store.watch(backend);
  // Serve anyway when Redis is down at start: detached executes answer 503 until it heals.
  if (backend instanceof RedisBackend && !(await backend.waitReady(REDIS_STARTUP_WAIT_MS))) {
    logger.warn({ redis: backend.display }, 'redis not reachable at start; detached executes answer 503 LOCK_UNAVAILABLE until it is');
  }
  // One timer and one batched renewal a tick for every run's lease; releases batched too.
  leases = closables.add(
    'lease keeper',
    new LeaseKeeper(backend, {
      ttlMs: settings.leaseTtlMs,
      onBatch: (op, count, seconds) => metrics.leaseBatch(op, count, seconds),
      onLate: () => metrics.lateRenewals.inc(),
    }),
    (k) => k.close(),
  );
  const stopWatcher = closables.add('stop watcher', new StopWatcher(backend, settings.stopPollMs), (w) => w.close());
  // The lease keeper gives a renewal up after TTL/6 (lease-keeper.ts): a Redis command allowed longer is given up before its own deadline.
  if (redis.target && redis.commandTimeoutMs >= settings.leaseTtlMs / 6) {
    logger.warn(
      { redis_command_timeout_ms: redis.commandTimeoutMs, lease_ttl_ms: settings.leaseTtlMs },
      'LONGRUN_REDIS_COMMAND_TIMEOUT_MS is not under LONGRUN_LEASE_TTL_MS / 6: the lease keeper gives a renewal up before Redis would time it out, and sends it again meanwhile (docs/configuration.md)',
    );
  }
  return { backend, leases, stopWatcher, metrics, leaseTtlMs: settings.leaseTtlMs };
}
