/** The follow part, wired from its settings (docs/spec.md §14): the per-workflow log and the hub on it. */
import type { CoordinationBackend } from '../coordination/backend';
import type { Closables } from '../core/closables';
import type { Logger } from '../core/log';
import type { RedisSettings } from '../redis/settings';
import type { RunRegistry } from '../run/registry';
import { INTEREST_TTL_MS, Follow } from './hub';
import type { FollowLog } from './log';
import { MemoryFollowLog } from './memory-log';
import type { FollowMetrics } from './metrics';
import { RedisFollowLog } from './redis-log';
import type { FollowSettings } from './settings';

export interface FollowPartDeps {
  redis: RedisSettings;
  /** Run records: whether a run of a workflow is in flight on any replica. */
  backend: CoordinationBackend;
  /** This process's runs, which report to the workflows followed. */
  registry: RunRegistry;
  metrics: FollowMetrics;
  replicaId: string;
  logger: Logger;
  closables: Closables;
}

/**
 * Where followed workflows' events are kept: Redis, shared by the replicas, or this
 * process's memory without it. A log lives one announcement TTL past its last use.
 */
function followLogOf(settings: FollowSettings, deps: FollowPartDeps): FollowLog {
  const { redis, logger } = deps;
  const logSettings = { ttlMs: INTEREST_TTL_MS, backlog: settings.backlogEvents };
  if (!redis.target) return new MemoryFollowLog(logSettings);
  let warned = false;
  return new RedisFollowLog(
    redis.target,
    deps.replicaId,
    { ...logSettings, commandTimeoutMs: redis.commandTimeoutMs, connectTimeoutMs: redis.connectTimeoutMs },
    // The coordination backend logs each outage; this connection's errors are said once.
    (err) => {
      if (!warned) logger.warn({ err: err.message }, 'follow log: redis connection error (follow streams answer 503 until it heals)');
      warned = true;
    },
  );
}

export function createFollow(settings: FollowSettings, deps: FollowPartDeps): Follow {
  const { registry, backend, metrics, replicaId } = deps;
  return deps.closables.add('follow', new Follow({ log: followLogOf(settings, deps), registry, backend, metrics, replicaId, settings }), (f) => f.close());
}
