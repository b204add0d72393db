/**
 * The Redis coordination backend. Every multi-step operation is one Lua script (each in
 * its own file beside this one, KEYS/ARGV/return documented at its top), defined by the
 * one loader (src/redis/scripts.ts).
 * Commands fail fast when Redis is unreachable (no offline queue, a command timeout), so
 * an execute can answer 503 LOCK_UNAVAILABLE at once instead of hanging.
 *
 * Work that scales with runs is batched: lease renewals and lock releases of many runs
 * go in one script call per primary (renew-leases-1.lua, release-locks-1.lua; at most
 * BATCH_LEASES leases each), the stop poll in one MGET (or, on a Cluster, one
 * read-stops-1.lua per primary).
 *
 * Stop notices arrive on a second connection subscribed to the stop channel (published by
 * the stop endpoint) and to keyspace notifications for stop keys set by the owner
 * directly — which the server sends only if it is configured to. longrun checks that on
 * every primary it connects to (after a Sentinel failover too: the setting is not
 * replicated) and sets it only when allowed (LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS);
 * otherwise the stop poll finds such keys. Both connections follow a failover (see
 * src/redis/connection.ts); a notice published while the subscriber reconnects is
 * missed, and the poll and the next renewal see that stop instead.
 *
 * On a Redis Cluster (LONGRUN_REDIS_KEYS=cluster) keys are hash-tagged per workflow
 * (src/redis/keys.ts), the stop channel is ordinary PUBLISH (delivered on every node), and
 * keyspace notifications — a per-node feature — are not used: stop keys the owner sets
 * directly are seen by the poll and the renewals.
 */
import { Command, type Cluster, type Redis } from 'ioredis';
import type { Logger } from '../core/log';
import { storeFences, type StoreFence } from '../core/vocabulary';
import type { RedisConnection, RedisEvent } from '../redis/words';
import {
  CoordinationError,
  LockStoreFenced,
  type ActorSlot,
  type CoordinationBackend,
  type LeaseRefresh,
  type LeaseRenewal,
  type LockRelease,
  type ReleaseOutcome,
  type RenewOutcome,
  type RenewResult,
  type StoredRunRecord,
} from './backend';
import { closeRedis, connectedAddress, createRedis, whenReady, type RedisClient } from '../redis/connection';
import { hashSlot } from '../redis/hash-slot';
import { STOP_CHANNEL, clusterKeys, keyOfKeyspaceChannel, keyspacePattern, workhorseKeys, type RedisKeys } from '../redis/keys';
import { defineCommands, luaCommand } from '../redis/scripts';
import { describeRedisTarget, type RedisTarget } from '../redis/url';
import { readPolicy, verdict, type PrimaryPolicy } from './eviction-check';
import { StopReads } from './stop-reads';
import { StoreFences, type StoreFenceView } from './store-fences';

type Arg = string | number;

interface Scripts {
  /** 1 or 0, or the store fence: [why, ms left] (acquire-lock-2.lua). */
  acquireLock(lock: string, stop: string, token: string, ttlMs: number, marker: string): Promise<number | [string, number]>;
  renewLeases(routeKey: string, ...args: Arg[]): Promise<Array<number | string>>;
  releaseLocks(routeKey: string, ...args: Arg[]): Promise<number[]>;
  readStops(routeKey: string, ...keys: string[]): Promise<string[]>;
  requestStop(lock: string, stop: string, value: string, ttlMs: number, channel: string, workflowId: string): Promise<number>;
  actorSlot(actor: string, member: string, max: number, ttlMs: number): Promise<number>;
  writeRunRecord(key: string, ttlMs: number, ...fields: string[]): Promise<number>;
}

type ScriptedClient = RedisClient & Scripts;

/**
 * Leases (or locks) per script call. A call runs atomically, holding Redis for its whole
 * length — about 10 µs per lease on the 2-core benchmark VM, so 250 keep one call near
 * 2.5 ms — and a process holding 10 000 runs at the default 60 s lease needs two calls a
 * second (500 renewals).
 */
export const BATCH_LEASES = 250;
/** Stop keys per read (MGET or read-stops-1.lua). */
const BATCH_STOP_KEYS = 1_000;

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
 * `unknown` (CONFIG refused, as on many managed services), `not_used` (a Redis Cluster).
 */
export type NotificationState = 'on' | 'configured' | 'off' | 'unknown' | 'not_used';

/** Reports a connection's events; the 'error' listener also keeps ioredis from printing them. */
function watch(redis: RedisClient, connection: RedisConnection, options: RedisBackendOptions): void {
  const report = options.onEvent ?? (() => undefined);
  redis.on('ready', () => report(connection, 'ready'));
  redis.on('error', (err: Error) => report(connection, 'error', err));
  redis.on('reconnecting', () => report(connection, 'reconnecting'));
  redis.on('end', () => report(connection, 'end'));
}

/** One script call of a batch: items (indices into the batch) served by one primary, and actor slots. */
interface Call {
  /** Where the call is routed: a key of the batch on that primary. */
  routeKey: string;
  items: number[];
  /** `lease`: 1-based position in `items` of the lease the slot belongs to; 0: refresh it (its lease was seen held in an earlier call). */
  actors: Array<{ key: string; member: string; lease: number }>;
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

function failure(what: string, err: unknown): CoordinationError {
  return new CoordinationError(`redis ${what} failed: ${(err as Error).message}`, { cause: err });
}

export class RedisBackend implements CoordinationBackend {
  readonly kind = 'redis' as const;
  readonly redis: ScriptedClient;
  readonly keys: RedisKeys;
  /** LONGRUN_REDIS_URL with its credentials masked: what logs show. */
  readonly display: string;
  private readonly cluster: Cluster | undefined;
  private readonly subscriber: RedisClient;
  private readonly stopHandlers: Array<(workflowId: string) => void> = [];
  private readonly configureNotifications: boolean;
  private readonly logger: Logger | undefined;
  /** Stop-key reads (one before each action served), batched: one MGET for many actions. */
  private readonly stopReads = new StopReads((ids) => this.readStopsBatched(ids));
  /** The check made on the latest (re)connect; waitReady awaits the first. */
  private notificationCheck: Promise<NotificationState> | undefined;
  private connected = false;
  private everConnected = false;
  private lastError: string | undefined;
  private closing: Promise<void> | undefined;
  /** Each Cluster primary's lowest slot, where its store marker lives. */
  private readonly lowestSlots = new Map<string, number>();
  /** Each primary's store fence, as the scripts last told it. */
  private readonly fences: StoreFences;
  /** The maxmemory-policy check, made once, on the first connection (eviction-check.ts). */
  private policyCheck: Promise<void> | undefined;
  private policies: readonly PrimaryPolicy[] = [];

  constructor(target: RedisTarget, options: RedisBackendOptions) {
    this.display = describeRedisTarget(target);
    this.configureNotifications = options.configureNotifications ?? false;
    this.logger = options.logger;
    const isCluster = target.mode === 'cluster';
    this.keys = isCluster ? clusterKeys : workhorseKeys;
    this.fences = new StoreFences(!isCluster, (primary, remainingMs, why) => this.logFence(primary, remainingMs, why));
    const settings = { commandTimeoutMs: options.commandTimeoutMs, connectTimeoutMs: options.connectTimeoutMs };
    const redis = createRedis(target, 'commands', settings);
    watch(redis, 'commands', options);
    // Failures surface as failed commands; the connection's ups and downs are logged once each.
    redis.on('error', (err: Error) => (this.lastError = err.message));
    redis.on('ready', () => this.onReady());
    redis.on('close', () => this.onClose());
    // On a Cluster the batch scripts reach keys of many slots of the primary they are sent to.
    const batch = { crossSlot: isCluster };
    // The lock and lease scripts read the store marker (store-fence.lua), on a Cluster a key
    // of another slot of the same primary.
    const fenced = { crossSlot: isCluster, preludes: ['store-fence.lua'] };
    this.redis = defineCommands<Scripts>(redis, [
      luaCommand(__dirname, 'acquire-lock-2.lua', fenced),
      luaCommand(__dirname, 'renew-leases-1.lua', fenced),
      luaCommand(__dirname, 'release-locks-1.lua', batch),
      luaCommand(__dirname, 'read-stops-1.lua', batch),
      luaCommand(__dirname, 'request-stop-2.lua'),
      luaCommand(__dirname, 'actor-slot-1.lua'),
      luaCommand(__dirname, 'write-run-record-1.lua'),
    ]);
    this.cluster = isCluster ? (redis as Cluster) : undefined;

    this.subscriber = createRedis(target, 'subscriber', settings);
    watch(this.subscriber, 'subscriber', options);
    this.subscriber.on('message', (_channel: string, workflowId: string) => this.notify(workflowId));
    this.subscriber.subscribe(STOP_CHANNEL).catch(() => undefined);
    if (!isCluster) {
      this.subscriber.on('pmessage', (_pattern: string, channel: string) => {
        const workflowId = this.keys.workflowOfStopKey(keyOfKeyspaceChannel(channel));
        if (workflowId !== undefined) this.notify(workflowId);
      });
      // Notices of this database only; harmless (silent) where the server sends none.
      const db = target.mode === 'sentinel' ? target.db : Number((redis as { options: { db?: number } }).options.db ?? 0);
      this.subscriber.psubscribe(keyspacePattern(db, this.keys.stopKeyPattern)).catch(() => undefined);
    }
  }

  private onReady(): void {
    const reconnect = this.everConnected;
    this.connected = true;
    this.everConnected = true;
    this.lastError = undefined;
    const check = this.checkNotifications();
    this.notificationCheck = check;
    this.policyCheck ??= this.checkPolicies();
    void check.then((notifications) => {
      const where = this.cluster ? { primaries: this.cluster.nodes('master').length } : { primary: this.connectedPrimary() };
      this.logger?.info({ redis: this.display, ...where, keyspace_notifications: notifications, reconnect }, reconnect ? 'redis reconnected' : 'redis connected');
    });
  }

  /** The address of the server the command connection is on (one server, or Sentinel's primary). */
  private connectedPrimary(): string | undefined {
    return connectedAddress(this.redis as Redis);
  }

  /**
   * Each primary's maxmemory-policy, read once (eviction-check.ts), and a warning for each that
   * may evict a lock key or could not be read. Never fails: what it cannot read is `unknown`.
   */
  private async checkPolicies(): Promise<void> {
    const primaries = this.cluster
      ? this.cluster.nodes('master').map((node) => ({ primary: `${node.options.host}:${node.options.port}`, client: node }))
      : [{ primary: this.connectedPrimary() ?? 'unknown', client: this.redis as Redis }];
    this.policies = await Promise.all(primaries.map(({ primary, client }) => readPolicy(primary, client)));
    for (const result of this.policies) {
      const said = verdict(result);
      if (said) this.logger?.warn({ redis: this.display, primary: result.primary, maxmemory_policy: result.named ?? result.policy }, said.message);
    }
  }

  /** Each primary's maxmemory-policy as the start-up check read it (none before the first connection). */
  maxmemoryPolicies(): readonly PrimaryPolicy[] {
    return this.policies;
  }

  /** Each primary's store fence as now (its time left, 0 once over), as lock and lease scripts last told it. */
  storeFences(): StoreFenceView[] {
    return this.fences.view(this.cluster ? this.cluster.nodes('master').map((node) => `${node.options.host}:${node.options.port}`) : undefined);
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
    if (this.cluster) return 'not_used';
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
    const ready = await whenReady(this.redis, timeoutMs);
    if (ready) await Promise.all([this.notificationCheck, this.policyCheck]);
    return ready;
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw failure(what, err);
    }
  }

  /** The primary serving `key` ('' for a single server, or while a Cluster's slot map is unknown). */
  private nodeOf(key: string): string {
    return this.cluster ? (this.cluster.slots[hashSlot(key)]?.[0] ?? '') : '';
  }

  /**
   * The store marker of the primary serving `key` (store-fence.lua): the one marker of a
   * single server; on a Cluster the marker in that primary's lowest slot (found again when
   * the slot map moved it), or in the key's own slot while the map is unknown.
   */
  private markerFor(key: string): string {
    const cluster = this.cluster;
    if (!cluster) return this.keys.storeMarker(0);
    const node = this.nodeOf(key);
    if (node === '') return this.keys.storeMarker(hashSlot(key));
    let slot = this.lowestSlots.get(node);
    if (slot === undefined || cluster.slots[slot]?.[0] !== node) {
      slot = cluster.slots.findIndex((nodes) => nodes?.[0] === node);
      if (slot < 0) return this.keys.storeMarker(hashSlot(key));
      this.lowestSlots.set(node, slot);
    }
    return this.keys.storeMarker(slot);
  }

  /** The primary serving `key`, as a label: its address, or `unknown` while it cannot be told. */
  private primaryOf(key: string): string {
    return (this.cluster ? this.nodeOf(key) : this.connectedPrimary()) || 'unknown';
  }

  /** A script's answer about the fence of the primary serving `key`: [ms left, why] ('' when none). */
  private fenceHeard(key: string, remainingMs: number, why: string): void {
    this.fences.heard(this.primaryOf(key), remainingMs, (storeFences as readonly string[]).includes(why) ? (why as StoreFence) : undefined);
  }

  /** A fence heard for the first time (StoreFences): logged once, saying what it is. */
  private logFence(primary: string, remainingMs: number, why: StoreFence): void {
    const fields = { redis: this.display, primary, fence: why, fence_ms: remainingMs };
    if (why === 'new') {
      this.logger?.warn(
        fields,
        'the lock store is new (no longrun marker, and Redis is not one lease TTL old yet): no new lock until it is; `longrun store mark` marks a new store (docs/deploying.md)',
      );
    } else {
      this.logger?.warn(fields, 'the lock store lost its data (a restart, a failover or a flush): no new lock until every lease that may still be alive is re-asserted or expired');
    }
  }

  /**
   * Splits a batch into script calls: items grouped by the primary serving their lock key
   * (one group on a single server), at most BATCH_LEASES per call. Each actor slot goes with
   * its lease when the same primary serves it; the others (only on a Cluster) are returned
   * apart, with their item, for a call to their own primary.
   */
  private plan(
    count: number,
    lockOf: (i: number) => string,
    actorOf: (i: number) => ActorSlot | undefined,
  ): { calls: Call[]; elsewhere: Array<{ item: number; key: string; member: string }> } {
    const byNode = new Map<string, number[]>();
    const nodes: string[] = new Array(count);
    for (let i = 0; i < count; i++) {
      nodes[i] = this.nodeOf(lockOf(i));
      push(byNode, nodes[i] as string, i);
    }
    const calls: Call[] = [];
    const elsewhere: Array<{ item: number; key: string; member: string }> = [];
    for (const items of byNode.values()) {
      for (let at = 0; at < items.length; at += BATCH_LEASES) {
        const part = items.slice(at, at + BATCH_LEASES);
        const call: Call = { routeKey: lockOf(part[0] as number), items: part, actors: [] };
        part.forEach((i, position) => {
          const actor = actorOf(i);
          if (!actor) return;
          const key = this.keys.actor(actor.actorId);
          if (this.nodeOf(key) === nodes[i]) call.actors.push({ key, member: actor.member, lease: position + 1 });
          else elsewhere.push({ item: i, key, member: actor.member });
        });
        calls.push(call);
      }
    }
    return { calls, elsewhere };
  }

  /** Calls of actor slots alone, grouped by the primary serving each actor set. */
  private actorCalls(actors: Array<{ key: string; member: string }>): Call[] {
    const byNode = new Map<string, Call['actors']>();
    for (const { key, member } of actors) push(byNode, this.nodeOf(key), { key, member, lease: 0 });
    const calls: Call[] = [];
    for (const list of byNode.values()) {
      for (let at = 0; at < list.length; at += BATCH_LEASES) {
        const part = list.slice(at, at + BATCH_LEASES);
        calls.push({ routeKey: (part[0] as { key: string }).key, items: [], actors: part });
      }
    }
    return calls;
  }

  async acquire(workflowId: string, token: string, ttlMs: number): Promise<boolean> {
    const lock = this.keys.lock(workflowId);
    const answer = await this.call('acquire', () => this.redis.acquireLock(lock, this.keys.stop(workflowId), token, ttlMs, this.markerFor(lock)));
    if (Array.isArray(answer)) {
      const [why, remainingMs] = answer;
      this.fenceHeard(lock, remainingMs, why);
      throw new LockStoreFenced(remainingMs, why === 'new' ? 'new' : 'lost');
    }
    if (answer === 1) this.fenceHeard(lock, 0, '');
    return answer === 1;
  }

  async renew(workflowId: string, token: string, ttlMs: number, refresh: LeaseRefresh): Promise<RenewResult> {
    const [outcome] = await this.renewMany(ttlMs, [{ workflowId, token, refresh }]);
    if (outcome instanceof Error) throw outcome;
    return outcome as RenewResult;
  }

  async renewMany(ttlMs: number, leases: readonly LeaseRenewal[], answered?: (index: number, outcome: RenewOutcome) => void): Promise<RenewOutcome[]> {
    const outcomes: RenewOutcome[] = new Array(leases.length);
    const lease = (i: number): LeaseRenewal => leases[i] as LeaseRenewal;
    const { calls, elsewhere } = this.plan(
      leases.length,
      (i) => this.keys.lock(lease(i).workflowId),
      (i) => lease(i).refresh.actor,
    );
    const send = async (call: Call): Promise<void> => {
      const { lock, stop, run } = this.keys.parts;
      const args: Arg[] = [ttlMs, call.items.length, call.actors.length, ...lock, ...stop, ...run, this.markerFor(call.routeKey)];
      for (const i of call.items) {
        const { workflowId, token, refresh } = lease(i);
        const record = refresh.record;
        // An empty state: nothing changed, the script only extends the record's TTL.
        args.push(workflowId, token, refresh.runId, record?.state ?? '', record?.lastActionAt ?? '', record?.inFlight ?? '');
      }
      for (const actor of call.actors) args.push(actor.key, actor.member, actor.lease);
      try {
        const answer = await this.redis.renewLeases(call.routeKey, ...args);
        call.items.forEach((i, position) => {
          const owned = answer[2 * position];
          const stop = answer[2 * position + 1];
          outcomes[i] = { owned: owned === 1 || owned === 2, ...(owned === 2 ? { reasserted: true } : {}), stop: stop === '' || stop === undefined ? null : String(stop) };
        });
        const tail = 2 * call.items.length;
        this.fenceHeard(call.routeKey, Number(answer[tail] ?? 0), String(answer[tail + 1] ?? ''));
      } catch (err) {
        const error = failure('renew', err);
        for (const i of call.items) outcomes[i] = error;
      }
      if (answered) for (const i of call.items) answered(i, outcomes[i] as RenewOutcome);
    };
    await Promise.all(calls.map(send));
    // Actor sets another primary serves (a Cluster): refreshed once their leases are seen
    // held, in a second round trip. Best effort, as a refresh always was: a slot that
    // misses one is still released with its run, or expires a TTL after its last refresh.
    const held = elsewhere.filter(({ item }) => {
      const outcome = outcomes[item];
      return outcome !== undefined && !(outcome instanceof Error) && outcome.owned;
    });
    if (held.length > 0) await Promise.all(this.actorCalls(held).map(send));
    return outcomes;
  }

  async release(workflowId: string, token: string, runId: string, actor?: ActorSlot): Promise<void> {
    const [outcome] = await this.releaseMany([{ workflowId, token, runId, ...(actor ? { actor } : {}) }]);
    if (outcome) throw outcome;
  }

  async releaseMany(releases: readonly LockRelease[]): Promise<ReleaseOutcome[]> {
    const outcomes: ReleaseOutcome[] = new Array(releases.length).fill(null);
    const release = (i: number): LockRelease => releases[i] as LockRelease;
    const { calls, elsewhere } = this.plan(
      releases.length,
      (i) => this.keys.lock(release(i).workflowId),
      (i) => release(i).actor,
    );
    await Promise.all(
      [...calls, ...this.actorCalls(elsewhere)].map(async (call) => {
        const args: Arg[] = [call.items.length, call.actors.length];
        for (const i of call.items) {
          const { workflowId, token, runId } = release(i);
          args.push(this.keys.lock(workflowId), this.keys.run(workflowId), this.keys.stop(workflowId), token, runId);
        }
        for (const actor of call.actors) args.push(actor.key, actor.member);
        try {
          await this.redis.releaseLocks(call.routeKey, ...args);
        } catch (err) {
          const error = failure('release', err);
          for (const i of call.items) outcomes[i] = error;
        }
      }),
    );
    return outcomes;
  }

  readStop(workflowId: string): Promise<string | null> {
    return this.stopReads.read(workflowId);
  }

  /**
   * StopReads' read: on one server, one MGET sent as it is — StopReads already batches,
   * so ioredis's auto-pipeline (a Pipeline object per turn, one pipeline in flight at a
   * time) would only add its cost. On a Cluster, readStops (one call per primary).
   */
  private readStopsBatched(workflowIds: string[]): Promise<Array<string | null>> {
    if (this.cluster || workflowIds.length > BATCH_STOP_KEYS) return this.readStops(workflowIds);
    const command = new Command(
      'mget',
      workflowIds.map((id) => this.keys.stop(id)),
      { replyEncoding: 'utf8' },
    );
    (this.redis as Redis).sendCommand(command);
    return (command.promise as Promise<Array<string | null>>).then(
      (values) => values.map((value) => value ?? null),
      (err: unknown) => {
        throw failure('read stops', err);
      },
    );
  }

  readStops(workflowIds: string[]): Promise<Array<string | null>> {
    if (workflowIds.length === 0) return Promise.resolve([]);
    return this.call('read stops', async () => {
      const keys = workflowIds.map((id) => this.keys.stop(id));
      const values: Array<string | null> = new Array(keys.length).fill(null);
      // MGET refuses keys of different slots on a Cluster: one read-stops-1.lua per primary there.
      const groups = new Map<string, number[]>();
      keys.forEach((key, i) => push(groups, this.nodeOf(key), i));
      const reads: Array<Promise<void>> = [];
      for (const indices of groups.values()) {
        for (let at = 0; at < indices.length; at += BATCH_STOP_KEYS) {
          const part = indices.slice(at, at + BATCH_STOP_KEYS);
          const batch = part.map((i) => keys[i] as string);
          reads.push(
            (this.cluster ? this.redis.readStops(batch[0] as string, ...batch) : this.redis.mget(batch)).then((answer) =>
              part.forEach((i, j) => {
                const value = answer[j];
                values[i] = value === undefined || value === null || (this.cluster && value === '') ? null : value;
              }),
            ),
          );
        }
      }
      await Promise.all(reads);
      return values;
    });
  }

  clearStop(workflowId: string): Promise<void> {
    return this.call('clear stop', async () => {
      await this.redis.del(this.keys.stop(workflowId));
    });
  }

  requestStop(workflowId: string, value: string, ttlMs: number): Promise<boolean> {
    return this.call(
      'request stop',
      async () => (await this.redis.requestStop(this.keys.lock(workflowId), this.keys.stop(workflowId), value, ttlMs, STOP_CHANNEL, workflowId)) === 1,
    );
  }

  writeRunRecord(workflowId: string, record: StoredRunRecord, ttlMs: number): Promise<void> {
    return this.call('write run record', async () => {
      const fields: string[] = [];
      for (const [field, value] of Object.entries(record)) if (value !== undefined) fields.push(field, String(value));
      await this.redis.writeRunRecord(this.keys.run(workflowId), ttlMs, ...fields);
    });
  }

  readRunRecord(workflowId: string): Promise<StoredRunRecord | null> {
    return this.call('read run record', async () => {
      const hash = await this.redis.hgetall(this.keys.run(workflowId));
      return hash['run_id'] ? (hash as unknown as StoredRunRecord) : null;
    });
  }

  acquireActorSlot(actorId: string, member: string, max: number, ttlMs: number): Promise<boolean> {
    return this.call('actor slot', async () => (await this.redis.actorSlot(this.keys.actor(actorId), member, max, ttlMs)) === 1);
  }

  releaseActorSlot(actorId: string, member: string): Promise<void> {
    return this.call('actor release', async () => {
      await this.redis.zrem(this.keys.actor(actorId), member);
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
