/**
 * Marking a new store, from outside a gateway (`longrun store mark`, docs/deploying.md "A new
 * Redis"). A gateway fences a Redis without longrun's marker until it is one lease TTL old
 * (store-fence.lua): it cannot tell a new server from one restarted empty. Whoever has just
 * created the server (an operator provisioning it, a test, a benchmark, the demo's
 * throwaway redis-server) marks it instead, and its first locks are granted at once.
 *
 * It refuses, changing nothing, a store that may have served a fleet: one that holds any
 * lock key (longrun's or Workhorse's, in either key scheme: SCAN on every primary), whose
 * marker names another server or says it lost its data, or that is a replica promoted
 * since it started (a failover) without a marker. Those are the losses the fence exists for.
 */
import type { Cluster, Redis } from 'ioredis';
import { closeRedis, connectedAddress, createRedis, whenReady, type RedisClient } from '../redis/connection';
import { clusterKeys, lockKeyPatterns, workhorseKeys } from '../redis/keys';
import { defineCommands, luaCommand, type LuaCommand } from '../redis/scripts';
import { describeRedisTarget, type RedisTarget } from '../redis/url';

/** What one primary said (mark-store-1.lua), or that it holds lock keys. */
export type PrimaryState = 'marked' | 'already' | 'lost' | 'promoted' | 'lock_keys';

export interface PrimaryMark {
  /** The primary's address (`host:port`). */
  primary: string;
  state: PrimaryState;
  /** `lock_keys`: how many, and one of them. */
  lockKeys?: number;
  example?: string;
  /** `lost`: how long its fence has left (0: none yet, the marker names another server). */
  fenceLeftMs?: number;
}

export interface StoreMarkResult {
  /** `marked`: every primary is marked now (some may have been already); `refused`: nothing was changed. */
  outcome: 'marked' | 'refused';
  /** LONGRUN_REDIS_URL with its credentials masked. */
  redis: string;
  /** `marked`: every primary; `refused`: those that hold lock keys, or else every primary as checked. */
  primaries: PrimaryMark[];
}

/** Redis could not be reached or answered with an error: nothing may have been marked. */
export class StoreMarkError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreMarkError';
  }
}

export interface StoreMarkOptions {
  connectTimeoutMs?: number;
  commandTimeoutMs?: number;
}

const SCAN_COUNT = 1_000;

interface Scripts {
  /** mark-store-1.lua: [state, fence ms left]. */
  markStore(marker: string, mode: 'check' | 'mark'): Promise<[string, number]>;
}

interface Primary {
  primary: string;
  /** A connection to that primary alone (SCAN is per node), with mark-store-1.lua defined. */
  node: Redis & Scripts;
  marker: string;
}

/**
 * Marks every primary of `target` as a new store, or refuses (see above). Throws
 * StoreMarkError when Redis cannot be reached or fails a command.
 */
export async function markNewStore(target: RedisTarget, options: StoreMarkOptions = {}): Promise<StoreMarkResult> {
  const connectTimeoutMs = options.connectTimeoutMs ?? 2_000;
  const redis = describeRedisTarget(target);
  const client = createRedis(target, 'commands', { connectTimeoutMs, commandTimeoutMs: options.commandTimeoutMs ?? 5_000 });
  let lastError: Error | undefined;
  client.on('error', (err: Error) => (lastError = err));
  try {
    // Reconnects are ioredis's (as for the gateway): give it a few attempts, then say why not.
    if (!(await whenReady(client, 2 * connectTimeoutMs + 1_000))) {
      throw new StoreMarkError(`cannot reach Redis at ${redis}: ${lastError?.message ?? 'no answer'}`, { cause: lastError });
    }
    const primaries = primariesOf(client, target, luaCommand(__dirname, 'mark-store-1.lua'));
    try {
      const holding = (await Promise.all(primaries.map(lockKeysOn))).filter((mark) => mark !== undefined);
      if (holding.length > 0) return { outcome: 'refused', redis, primaries: holding };
      // Checked on every primary first (mark-store-1.lua's dry run), so a refusal leaves none marked.
      const checked = await Promise.all(primaries.map((p) => markOn(p, 'check')));
      if (checked.some((mark) => refuses(mark.state))) return { outcome: 'refused', redis, primaries: checked };
      return { outcome: 'marked', redis, primaries: await Promise.all(primaries.map((p) => markOn(p, 'mark'))) };
    } catch (err) {
      throw new StoreMarkError(`Redis at ${redis} failed: ${(err as Error).message}`, { cause: err });
    }
  } finally {
    // QUIT only on a connection that is up: it would wait its whole timeout on one that is not.
    if (client.status === 'ready') await closeRedis(client);
    else client.disconnect();
  }
}

/** Whether a primary's state stops the marking. */
export function refuses(state: PrimaryState): boolean {
  return state === 'lost' || state === 'promoted' || state === 'lock_keys';
}

/** Each primary with its marker: the one of a single server, or each Cluster primary's in its lowest slot. */
function primariesOf(client: RedisClient, target: RedisTarget, markStore: LuaCommand<'markStore'>): Primary[] {
  if (target.mode !== 'cluster') {
    const redis = client as Redis;
    const node = defineCommands<Scripts, Redis>(redis, [markStore]);
    return [{ primary: connectedAddress(redis) ?? redis.options.host + ':' + redis.options.port, node, marker: workhorseKeys.storeMarker(0) }];
  }
  const cluster = client as Cluster;
  return cluster.nodes('master').map((node) => {
    const primary = `${node.options.host}:${node.options.port}`;
    const lowest = cluster.slots.findIndex((nodes) => nodes?.[0] === primary);
    if (lowest < 0) throw new StoreMarkError(`the Cluster's slot map names no slot of its primary ${primary}`);
    return { primary, node: defineCommands<Scripts, Redis>(node, [markStore]), marker: clusterKeys.storeMarker(lowest) };
  });
}

/** The lock keys on one primary (SCAN over its whole keyspace), or undefined when it holds none. */
async function lockKeysOn({ primary, node }: Primary): Promise<PrimaryMark | undefined> {
  let count = 0;
  let example: string | undefined;
  for (const pattern of lockKeyPatterns) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT);
      cursor = next;
      count += keys.length;
      example ??= keys[0];
    } while (cursor !== '0');
  }
  return count === 0 ? undefined : { primary, state: 'lock_keys', lockKeys: count, ...(example !== undefined ? { example } : {}) };
}

/** mark-store-1.lua on one primary: `check` says what it would do, `mark` does it. */
async function markOn({ primary, node, marker }: Primary, mode: 'check' | 'mark'): Promise<PrimaryMark> {
  const [state, left] = await node.markStore(marker, mode);
  const known: PrimaryState = state === 'marked' || state === 'already' || state === 'lost' || state === 'promoted' ? state : 'lost';
  return { primary, state: known, ...(known === 'lost' ? { fenceLeftMs: Number(left) } : {}) };
}
