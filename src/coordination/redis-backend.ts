/**
 * The Redis coordination backend. Every multi-step operation is one Lua script (each in
 * its own file, KEYS/ARGV/return documented at its top), loaded with defineCommand.
 * Commands fail fast when Redis is unreachable (no offline queue, a command timeout), so
 * an execute can answer 503 LOCK_UNAVAILABLE at once instead of hanging.
 *
 * Stop notices arrive on a second connection subscribed to the stop channel (published by
 * the stop endpoint) and to keyspace notifications for stop keys set by the owner
 * directly — which the server sends only if it is configured to. longrun checks that on
 * every primary it connects to (after a Sentinel failover too: the setting is not
 * replicated) and sets it only when allowed (LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS);
 * otherwise the stop poll finds such keys. Both connections follow a failover (see
 * redis-connection.ts); a notice published while the subscriber reconnects is missed,
 * and the poll and the next renewal see that stop instead.
 */
import { readFileSync } from 'node:fs';
import type Redis from 'ioredis';
import type { Logger } from '../log';
import { fromRoot } from '../paths';
import type { RedisConnection, RedisEvent } from '../vocabulary';
import { CoordinationError, type ActorSlot, type CoordinationBackend, type LeaseRefresh, type RenewResult, type RunRecord } from './backend';
import { STOP_CHANNEL, STOP_KEY_PREFIX, actorKey, lockKey, runKey, stopKey } from './keys';
import { closeRedis, createRedis } from './redis-connection';
import { describeRedisTarget, type RedisTarget } from './redis-url';

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
  /** Told of every connection event (ready, error, reconnecting, end), for metrics. */
  onEvent?: (connection: RedisConnection, event: RedisEvent, err?: Error) => void;
  /**
   * CONFIG SET the keyspace notifications stop keys need when a primary lacks them
   * (LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS). Default false: never reconfigure the server.
   */
  configureNotifications?: boolean;
  /** Where connection changes are logged (lost, connected to which primary); none when absent. */
  logger?: Logger;
}

/**
 * Keyspace notifications for stop keys on the primary connected to: `on` (already
 * configured), `configured` (longrun set them), `off` (not configured, not ours to set),
 * `unknown` (CONFIG refused, as on many managed services).
 */
export type NotificationState = 'on' | 'configured' | 'off' | 'unknown';

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
  /** LONGRUN_REDIS_URL with its credentials masked: what logs show. */
  readonly display: string;
  private readonly subscriber: Redis;
  private readonly stopHandlers: Array<(workflowId: string) => void> = [];
  private readonly configureNotifications: boolean;
  private readonly logger: Logger | undefined;
  /** The check made on the latest (re)connect; waitReady awaits the first. */
  private notificationCheck: Promise<NotificationState> | undefined;
  private connected = false;
  private everConnected = false;
  private lastError: string | undefined;
  private closing: Promise<void> | undefined;

  constructor(target: RedisTarget, options: RedisBackendOptions) {
    this.display = describeRedisTarget(target);
    this.configureNotifications = options.configureNotifications ?? false;
    this.logger = options.logger;
    const settings = { commandTimeoutMs: options.commandTimeoutMs, connectTimeoutMs: options.connectTimeoutMs };
    const redis = createRedis(target, 'commands', settings);
    watch(redis, 'commands', options);
    // Failures surface as failed commands; the connection's ups and downs are logged once each.
    redis.on('error', (err: Error) => (this.lastError = err.message));
    redis.on('ready', () => this.onReady());
    redis.on('close', () => this.onClose());
    redis.defineCommand('acquireLock', { numberOfKeys: 2, lua: script('acquire-lock.lua') });
    redis.defineCommand('renewLease', { numberOfKeys: 3, lua: script('renew-lease.lua') });
    redis.defineCommand('releaseLock', { numberOfKeys: 3, lua: script('release-lock.lua') });
    redis.defineCommand('requestStop', { numberOfKeys: 2, lua: script('request-stop.lua') });
    redis.defineCommand('actorSlot', { numberOfKeys: 1, lua: script('actor-slot.lua') });
    this.redis = redis as ScriptedRedis;

    this.subscriber = createRedis(target, 'subscriber', settings);
    watch(this.subscriber, 'subscriber', options);
    this.subscriber.on('message', (_channel: string, workflowId: string) => this.notify(workflowId));
    this.subscriber.on('pmessage', (_pattern: string, channel: string) => {
      const at = channel.indexOf(STOP_KEY_PREFIX);
      if (at >= 0) this.notify(channel.slice(at + STOP_KEY_PREFIX.length));
    });
    this.subscriber.subscribe(STOP_CHANNEL).catch(() => undefined);
    // Notices of this database only; harmless (silent) where the server sends none.
    this.subscriber.psubscribe(`__keyspace@${Number(redis.options.db ?? 0)}__:${STOP_KEY_PREFIX}*`).catch(() => undefined);
  }

  private onReady(): void {
    const reconnect = this.everConnected;
    this.connected = true;
    this.everConnected = true;
    this.lastError = undefined;
    const check = this.checkNotifications();
    this.notificationCheck = check;
    void check.then((notifications) => {
      const { remoteAddress, remotePort } = this.redis.stream ?? {};
      this.logger?.info(
        { redis: this.display, primary: remoteAddress ? `${remoteAddress}:${remotePort}` : undefined, keyspace_notifications: notifications, reconnect },
        reconnect ? 'redis reconnected' : 'redis connected',
      );
    });
  }

  private onClose(): void {
    // Logged once per outage (reconnect attempts close again without a ready between), and
    // not at all when closed on purpose. A Sentinel failover shows as lost, then reconnected.
    if (this.closing || !this.connected) return;
    this.connected = false;
    this.logger?.warn({ redis: this.display, error: this.lastError }, 'redis connection lost; reconnecting (detached executes answer 503 until it is back)');
  }

  /**
   * Keyspace notices for string keys on the primary just connected to: read, and set when
   * allowed and missing. A server that refuses CONFIG is left to the stop poll.
   */
  private async checkNotifications(): Promise<NotificationState> {
    let flags: string | undefined;
    try {
      const current = await this.redis.config('GET', 'notify-keyspace-events');
      flags = Array.isArray(current) ? String(current[1] ?? '') : '';
    } catch {
      flags = undefined;
    }
    if (flags !== undefined && /K/.test(flags) && /[$A]/.test(flags)) return 'on';
    if (!this.configureNotifications) return flags === undefined ? 'unknown' : 'off';
    try {
      await this.redis.config('SET', 'notify-keyspace-events', `${flags ?? ''}K$`);
      return 'configured';
    } catch {
      return flags === undefined ? 'unknown' : 'off';
    }
  }

  private notify(workflowId: string): void {
    for (const handler of this.stopHandlers) handler(workflowId);
  }

  /**
   * Resolves once connected and the server's keyspace notifications checked (true), or
   * after timeoutMs (false).
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
    if (ready) await this.notificationCheck;
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
      await Promise.all([closeRedis(this.redis), closeRedis(this.subscriber)]);
    })();
    return this.closing;
  }

  destroy(): void {
    this.stopHandlers.length = 0;
    this.redis.disconnect();
    this.subscriber.disconnect();
  }
}
