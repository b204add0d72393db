/**
 * The Redis section of the configuration (docs/configuration.md "Redis connection"): which Redis longrun
 * uses and how to reach it — read by the gateway (coordination, the follow log, the bridge
 * inboxes) and by `longrun store mark` (src/cli/), which reads nothing else.
 */
import { z } from 'zod';
import { ConfigError, read, readMs, type Env } from '../core/env';
import { redisKeySchemes, type RedisKeyScheme } from './keys';
import { RedisUrlError, parseRedisUrl, type RedisTarget } from './url';

export interface RedisSettings {
  /**
   * LONGRUN_REDIS_URL parsed; unset → the in-process lock backend (single replica). With
   * LONGRUN_REDIS_KEYS=cluster it is a Redis Cluster (mode `cluster`, hash-tagged keys).
   */
  target: RedisTarget | undefined;
  /**
   * LONGRUN_REDIS_KEYS: `workhorse` (Workhorse's key names, one primary) or `cluster`
   * (hash-tagged names, a Redis Cluster reached through the URL's seed nodes).
   */
  keys: RedisKeyScheme;
  /** Per-command deadline of Redis commands, and of connecting. */
  commandTimeoutMs: number;
  connectTimeoutMs: number;
}

const redisUrlForms = 'redis://, rediss://, redis+sentinel:// or rediss+sentinel:// (see docs/configuration.md)';
const clusterUrlForms = 'redis://[[user]:password@]host:port[,host:port…] or rediss://… naming nodes of the cluster (see docs/configuration.md)';

function readTarget(env: Env, keys: RedisKeyScheme): RedisTarget | undefined {
  const raw = env['LONGRUN_REDIS_URL']?.trim();
  if (raw === undefined || raw === '') {
    if (keys === 'cluster') throw new ConfigError('LONGRUN_REDIS_URL', `with LONGRUN_REDIS_KEYS=cluster, ${clusterUrlForms}`, raw);
    return undefined;
  }
  try {
    return parseRedisUrl(raw, { cluster: keys === 'cluster' });
  } catch (err) {
    if (err instanceof RedisUrlError) {
      throw new ConfigError(
        'LONGRUN_REDIS_URL',
        keys === 'cluster' ? `with LONGRUN_REDIS_KEYS=cluster, ${clusterUrlForms}` : `a URL of the form ${redisUrlForms}`,
        raw,
        err.message,
      );
    }
    throw err;
  }
}

/** The LONGRUN_REDIS_* variables of the Redis section. Throws ConfigError on the first invalid one. */
export function readRedisSettings(env: Env): RedisSettings {
  const keys = read(env, 'LONGRUN_REDIS_KEYS', z.enum(redisKeySchemes), redisKeySchemes.join(' or '), 'workhorse');
  return {
    target: readTarget(env, keys),
    keys,
    // A renewal must fail well inside the lease TTL, and a detached execute must answer
    // 503 at once rather than hang when Redis is away.
    commandTimeoutMs: readMs(env, 'LONGRUN_REDIS_COMMAND_TIMEOUT_MS', 2_000),
    connectTimeoutMs: readMs(env, 'LONGRUN_REDIS_CONNECT_TIMEOUT_MS', 2_000),
  };
}
