/**
 * The Redis coordination backend. Every multi-step operation is one Lua script (each in
 * its own file, KEYS/ARGV/return documented at its top), loaded with defineCommand.
 * Commands fail fast when Redis is unreachable (no offline queue, a command timeout), so
 * an execute can answer 503 LOCK_UNAVAILABLE at once instead of hanging.
 *
 * Stop notices arrive on a second connection subscribed to the stop channel (published by
 * the stop endpoint) and, where the server allows it, to keyspace notifications for stop
 * keys set by the owner directly.
 */
import { readFileSync } from 'node:fs';
import Redis from 'ioredis';
import { fromRoot } from '../paths';
import type { RedisConnection, RedisEvent } from '../vocabulary';
import { CoordinationError, type ActorSlot, type CoordinationBackend, type LeaseRefresh, type RenewResult, type RunRecord } from './backend';
import { STOP_CHANNEL, STOP_KEY_PREFIX, actorKey, lockKey, runKey, stopKey } from './keys';

interface Scripts {
  acquireLock(lock: string, stop: string, token: string, ttlMs: number): Promise<number>;
  renewLease(lock: string, stop: string, run: string, token: string, ttlMs: number, runId: string, state: string, lastActionAt: string, ...inFlight: string[]): Promise<[number, string]>;
  releaseLock(lock: string, run: string, stop: string, token: string, runId: string): Promise<number>;
  requestStop(lock: string, stop: string, value: string, ttlMs: number, channel: string, workflowId: string): Promise<number>;
  actorSlot(actor: string, member: string, max: number, ttlMs: number): Promise<number>;
}

type ScriptedRedis = Redis & Scripts;

// Read from src/ in both layouts: the scripts ship beside the code that runs them.
const script = (name: string): string => readFileSync(fromRoot('src', 'coordination', name), 'utf8');

export interface RedisBackendOptions {
  /** Per-command deadline; a lease renewal must fail well inside the lease TTL. */
  commandTimeoutMs: number;
  connectTimeoutMs: number;
  /** Told of every connection event (ready, error, reconnecting, end); errors also surface as failed commands. */
  onEvent?: (connection: RedisConnection, event: RedisEvent, err?: Error) => void;
}

// Keep reconnecting (capped backoff): Redis coming back must heal the gateway.
const retryStrategy = (times: number): number => Math.min(50 * times, 1_000);

/** Reports a connection's events; the 'error' listener also keeps ioredis from printing them. */
function watch(redis: Redis, connection: RedisConnection, options: RedisBackendOptions): void {
  const report = options.onEvent ?? (() => undefined);
  redis.on('ready', () => report(connection, 'ready'));
  redis.on('error', (err: Error) => report(connection, 'error', err));
  redis.on('reconnecting', () => report(connection, 'reconnecting'));
  redis.on('end', () => report(connection, 'end'));
}

export class RedisBackend implements CoordinationBackend {
  readonly kind = 'redis' as const;
  readonly redis: ScriptedRedis;
  private readonly subscriber: Redis;
  private readonly stopHandlers: Array<(workflowId: string) => void> = [];
  private closing: Promise<void> | undefined;

  constructor(url: string, options: RedisBackendOptions) {
    const redis = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: options.commandTimeoutMs,
      connectTimeout: options.connectTimeoutMs,
      enableAutoPipelining: true,
      retryStrategy,
    });
    watch(redis, 'commands', options);
    redis.defineCommand('acquireLock', { numberOfKeys: 2, lua: script('acquire-lock.lua') });
    redis.defineCommand('renewLease', { numberOfKeys: 3, lua: script('renew-lease.lua') });
    redis.defineCommand('releaseLock', { numberOfKeys: 3, lua: script('release-lock.lua') });
    redis.defineCommand('requestStop', { numberOfKeys: 2, lua: script('request-stop.lua') });
    redis.defineCommand('actorSlot', { numberOfKeys: 1, lua: script('actor-slot.lua') });
    this.redis = redis as ScriptedRedis;

    // The subscriber queues its SUBSCRIBE until connected and re-subscribes on reconnect.
    this.subscriber = new Redis(url, { retryStrategy, maxRetriesPerRequest: null, connectTimeout: options.connectTimeoutMs });
    watch(this.subscriber, 'subscriber', options);
    this.subscriber.on('message', (_channel: string, workflowId: string) => this.notify(workflowId));
    this.subscriber.on('pmessage', (_pattern: string, channel: string) => {
      const at = channel.indexOf(STOP_KEY_PREFIX);
      if (at >= 0) this.notify(channel.slice(at + STOP_KEY_PREFIX.length));
    });
    this.subscriber.subscribe(STOP_CHANNEL).catch(() => undefined);
    this.subscriber.psubscribe(`__keyspace@*__:${STOP_KEY_PREFIX}*`).catch(() => undefined);
  }

  private notify(workflowId: string): void {
    for (const handler of this.stopHandlers) handler(workflowId);
  }

  /**
   * Resolves once connected (true), or after timeoutMs (false). Also asks the server for
   * keyspace notices on string keys; a managed Redis may refuse, and polling covers it.
   */
  async waitReady(timeoutMs: number): Promise<boolean> {
    const ready =
      this.redis.status === 'ready' ||
      (await new Promise<boolean>((resolve) => {
        const done = (ok: boolean): void => {
          clearTimeout(timer);
          this.redis.off('ready', onReady);
          resolve(ok);
        };
        const onReady = (): void => done(true);
        const timer = setTimeout(() => done(false), timeoutMs);
        this.redis.on('ready', onReady);
      }));
    if (ready) {
      const current = await this.redis.config('GET', 'notify-keyspace-events').catch(() => undefined);
      const flags = Array.isArray(current) ? String(current[1] ?? '') : '';
      if (!/[K]/.test(flags) || !/[$A]/.test(flags)) {
        await this.redis.config('SET', 'notify-keyspace-events', `${flags}K$`).catch(() => undefined);
      }
    }
    return ready;
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new CoordinationError(`redis ${what} failed: ${(err as Error).message}`, { cause: err });
    }
  }

  acquire(workflowId: string, token: string, ttlMs: number): Promise<boolean> {
    return this.call('acquire', async () => (await this.redis.acquireLock(lockKey(workflowId), stopKey(workflowId), token, ttlMs)) === 1);
  }

  renew(workflowId: string, token: string, ttlMs: number, refresh: LeaseRefresh): Promise<RenewResult> {
    return this.call('renew', async () => {
      const [owned, stop] = await this.redis.renewLease(
        lockKey(workflowId),
        stopKey(workflowId),
        runKey(workflowId),
        token,
        ttlMs,
        refresh.runId,
        refresh.state,
        refresh.lastActionAt,
        ...(refresh.inFlight === undefined ? [] : [refresh.inFlight]),
      );
      if (owned === 1 && refresh.actor) {
        // Best effort: the slot outliving a missed renewal by one TTL is harmless.
        await this.redis.actorSlot(actorKey(refresh.actor.actorId), refresh.actor.member, Number.MAX_SAFE_INTEGER, ttlMs).catch(() => undefined);
      }
      return { owned: owned === 1, stop: stop === '' ? null : stop };
    });
  }

  release(workflowId: string, token: string, runId: string, actor?: ActorSlot): Promise<void> {
    return this.call('release', async () => {
      await this.redis.releaseLock(lockKey(workflowId), runKey(workflowId), stopKey(workflowId), token, runId);
      if (actor) await this.redis.zrem(actorKey(actor.actorId), actor.member);
    });
  }

  readStop(workflowId: string): Promise<string | null> {
    return this.call('read stop', () => this.redis.get(stopKey(workflowId)));
  }

  readStops(workflowIds: string[]): Promise<Array<string | null>> {
    if (workflowIds.length === 0) return Promise.resolve([]);
    return this.call('read stops', () => this.redis.mget(workflowIds.map(stopKey)));
  }

  clearStop(workflowId: string): Promise<void> {
    return this.call('clear stop', async () => {
      await this.redis.del(stopKey(workflowId));
    });
  }

  requestStop(workflowId: string, value: string, ttlMs: number): Promise<boolean> {
    return this.call('request stop', async () => (await this.redis.requestStop(lockKey(workflowId), stopKey(workflowId), value, ttlMs, STOP_CHANNEL, workflowId)) === 1);
  }

  writeRunRecord(workflowId: string, record: RunRecord, ttlMs: number): Promise<void> {
    return this.call('write run record', async () => {
      // Every field is written, so nothing stale survives; auto-pipelining sends both at once.
      await Promise.all([this.redis.hset(runKey(workflowId), { ...record }), this.redis.pexpire(runKey(workflowId), ttlMs)]);
    });
  }

  readRunRecord(workflowId: string): Promise<RunRecord | null> {
    return this.call('read run record', async () => {
      const hash = await this.redis.hgetall(runKey(workflowId));
      return hash['run_id'] ? (hash as unknown as RunRecord) : null;
    });
  }

  acquireActorSlot(actorId: string, member: string, max: number, ttlMs: number): Promise<boolean> {
    return this.call('actor slot', async () => (await this.redis.actorSlot(actorKey(actorId), member, max, ttlMs)) === 1);
  }

  releaseActorSlot(actorId: string, member: string): Promise<void> {
    return this.call('actor release', async () => {
      await this.redis.zrem(actorKey(actorId), member);
    });
  }

  onStopNotice(handler: (workflowId: string) => void): void {
    this.stopHandlers.push(handler);
  }

  /**
   * QUIT on each connection (queued commands are answered first); a connection that is
   * not up, or whose QUIT is not answered within a second (a paused server), is dropped.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.stopHandlers.length = 0;
      await Promise.all([quit(this.redis), quit(this.subscriber)]);
    })();
    return this.closing;
  }

  destroy(): void {
    this.stopHandlers.length = 0;
    this.redis.disconnect();
    this.subscriber.disconnect();
  }
}

/** How long a QUIT may wait for its answer before the connection is dropped. */
const QUIT_TIMEOUT_MS = 1_000;

async function quit(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), QUIT_TIMEOUT_MS)));
  const answered = await Promise.race([redis.quit().then(() => 'quit' as const, () => 'failed' as const), late]);
  clearTimeout(timer);
  if (answered !== 'quit') redis.disconnect();
}
