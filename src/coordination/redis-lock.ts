/**
 * The Redis lock backend: SET NX PX to acquire, renew-lease.lua to extend and read the
 * stop flag atomically, release-lock.lua to compare-and-delete. Commands fail fast when
 * Redis is unreachable (no offline queue, a command timeout) so an execute can answer
 * 503 LOCK_UNAVAILABLE at once instead of hanging.
 */
import { readFileSync } from 'node:fs';
import Redis from 'ioredis';
import { fromRoot } from '../paths';
import { lockKey, stopKey } from './keys';
import { LockBackendError, type LockBackend, type RenewResult } from './lock-backend';

interface LeaseCommands {
  renewLease(lock: string, stop: string, token: string, ttlMs: number): Promise<[number, string]>;
  releaseLock(lock: string, token: string): Promise<number>;
}

type RedisWithScripts = Redis & LeaseCommands;

// Read from src/ in both layouts: the scripts ship beside the code that runs them.
const script = (name: string): string => readFileSync(fromRoot('src', 'coordination', name), 'utf8');

export interface RedisLockOptions {
  /** Per-command deadline; a lease renewal must fail well inside the lease TTL. */
  commandTimeoutMs?: number;
}

export class RedisLockBackend implements LockBackend {
  readonly kind = 'redis' as const;
  readonly redis: RedisWithScripts;
  private closing: Promise<void> | undefined;

  constructor(url: string, options: RedisLockOptions = {}) {
    const redis = new Redis(url, {
      lazyConnect: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: options.commandTimeoutMs ?? 2_000,
      connectTimeout: 2_000,
      // Keep reconnecting (capped backoff): Redis coming back must heal the gateway.
      retryStrategy: (times) => Math.min(50 * times, 1_000),
    });
    // Connection errors surface as failed commands; without a listener ioredis logs them.
    redis.on('error', () => undefined);
    redis.defineCommand('renewLease', { numberOfKeys: 2, lua: script('renew-lease.lua') });
    redis.defineCommand('releaseLock', { numberOfKeys: 1, lua: script('release-lock.lua') });
    this.redis = redis as RedisWithScripts;
  }

  /**
   * Resolves once connected, or after timeoutMs (false) — commands fail fast while
   * disconnected, so a gateway waits for its first connection before serving.
   */
  waitReady(timeoutMs: number): Promise<boolean> {
    if (this.redis.status === 'ready') return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        this.redis.off('ready', onReady);
        resolve(ok);
      };
      const onReady = (): void => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.redis.on('ready', onReady);
    });
  }

  async acquire(workflowId: string, token: string, ttlMs: number): Promise<boolean> {
    try {
      return (await this.redis.set(lockKey(workflowId), token, 'PX', ttlMs, 'NX')) === 'OK';
    } catch (err) {
      throw new LockBackendError(`redis acquire failed: ${(err as Error).message}`, { cause: err });
    }
  }

  async renew(workflowId: string, token: string, ttlMs: number): Promise<RenewResult> {
    try {
      const [owned, stop] = await this.redis.renewLease(lockKey(workflowId), stopKey(workflowId), token, ttlMs);
      return { owned: owned === 1, stop: stop === '' ? null : stop };
    } catch (err) {
      throw new LockBackendError(`redis renew failed: ${(err as Error).message}`, { cause: err });
    }
  }

  async release(workflowId: string, token: string): Promise<void> {
    try {
      await this.redis.releaseLock(lockKey(workflowId), token);
    } catch (err) {
      throw new LockBackendError(`redis release failed: ${(err as Error).message}`, { cause: err });
    }
  }

  close(): Promise<void> {
    this.closing ??= this.redis.quit().then(
      () => undefined,
      () => this.redis.disconnect(),
    );
    return this.closing;
  }
}
