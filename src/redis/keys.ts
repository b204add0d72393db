/**
 * Every Redis key and channel name longrun uses, in one place (test/unit/redis-keys.test.ts
 * pins each byte for byte: Workhorse shares the lock keys, replicas of two builds share the rest).
 *
 * Coordination's keys (docs/spec.md §5) come in one of two schemes (LONGRUN_REDIS_KEYS):
 *
 * - `workhorse` (default): the lock, stop and run keys are Workhorse's own
 *   (`workhorse:duoworkflow:lock:<id>` …), so a fleet mixing Workhorse and longrun on one
 *   Redis stays exclusive. They carry no hash tag: a workflow's keys may live in different
 *   Cluster slots, so this scheme needs a single primary (optionally behind Sentinel).
 * - `cluster`: every key of one workflow shares the hash tag `{wf:<id>}`
 *   (`longrun:{wf:<id>}:lock`, `:stop`, `:run`), so every per-workflow script touches one
 *   slot of a Redis Cluster. An actor's run slots are one sorted set per actor
 *   (`longrun:{actor:<actor>}:runs`), spread over the slots like the workflows: no key is
 *   shared by every run.
 *
 * Besides, one hash per primary, the store marker (`longrun:store`; on a Cluster
 * `longrun:{<tag>}:store` in each primary's lowest slot): which server answered last, for
 * the store fence (coordination/store-fence.lua).
 *
 * The follow log's keys (follow/redis-log.ts) and the bridge inboxes (websocket/bridge/inbox.ts)
 * are longrun's alone: hash-tagged in every scheme, so each script call touches one slot.
 */
import { tagOfSlot } from './hash-slot';

export const redisKeySchemes = ['workhorse', 'cluster'] as const;
export type RedisKeyScheme = (typeof redisKeySchemes)[number];

/** A per-workflow key name as the text before and after the workflow id. */
export type KeyParts = readonly [prefix: string, suffix: string];

export interface RedisKeys {
  readonly scheme: RedisKeyScheme;
  lock(workflowId: string): string;
  stop(workflowId: string): string;
  run(workflowId: string): string;
  /**
   * The lock, stop and run key names around the workflow id, for a script that builds
   * them itself (a batch of renewals sends each lease's id, not its three key names).
   */
  readonly parts: { readonly lock: KeyParts; readonly stop: KeyParts; readonly run: KeyParts };
  actor(actorId: string): string;
  /**
   * The store marker (coordination/store-fence.lua) of the primary serving `slot`: one hash
   * per primary that says which server wrote it and until when new locks are refused. One
   * key for a single primary; on a Cluster, a key in the primary's lowest slot.
   */
  storeMarker(slot: number): string;
  /** A glob matching every stop key (for keyspace notifications). */
  readonly stopKeyPattern: string;
  /** The workflow id a stop key names, or undefined when `key` is not a stop key. */
  workflowOfStopKey(key: string): string | undefined;
}

/** Channel the stop endpoint publishes workflow ids on (keyspace notices may also arrive). */
export const STOP_CHANNEL = 'longrun:stop';

const WORKHORSE_STOP_PREFIX = 'workhorse:duoworkflow:stop:';

/** The key names of a workflow made from its parts, for the scheme's functions and for scripts alike. */
function perWorkflow(parts: RedisKeys['parts']): Pick<RedisKeys, 'lock' | 'stop' | 'run' | 'parts'> {
  const name =
    ([prefix, suffix]: KeyParts) =>
    (id: string) =>
      `${prefix}${id}${suffix}`;
  return { lock: name(parts.lock), stop: name(parts.stop), run: name(parts.run), parts };
}

/** Workhorse's key names (shared with Workhorse: a mixed fleet stays exclusive). */
export const workhorseKeys: RedisKeys = {
  scheme: 'workhorse',
  ...perWorkflow({ lock: ['workhorse:duoworkflow:lock:', ''], stop: [WORKHORSE_STOP_PREFIX, ''], run: ['workhorse:duoworkflow:run:', ''] }),
  actor: (actorId) => `longrun:actor:${actorId}`,
  storeMarker: () => 'longrun:store',
  stopKeyPattern: `${WORKHORSE_STOP_PREFIX}*`,
  workflowOfStopKey: (key) => (key.startsWith(WORKHORSE_STOP_PREFIX) ? key.slice(WORKHORSE_STOP_PREFIX.length) : undefined),
};

const CLUSTER_PREFIX = 'longrun:{wf:';
const CLUSTER_STOP_SUFFIX = '}:stop';

/**
 * Hash-tagged names for Redis Cluster. The server hashes what lies between the first `{`
 * and the first `}` after it — unless that is empty. The tag starts with `wf:`, so it is
 * never empty, and a workflow id holding `}` still gives its three keys one tag (the same
 * text up to that `}`), hence one slot.
 */
export const clusterKeys: RedisKeys = {
  scheme: 'cluster',
  ...perWorkflow({ lock: [CLUSTER_PREFIX, '}:lock'], stop: [CLUSTER_PREFIX, CLUSTER_STOP_SUFFIX], run: [CLUSTER_PREFIX, '}:run'] }),
  actor: (actorId) => `longrun:{actor:${actorId}}:runs`,
  storeMarker: (slot) => `longrun:{${tagOfSlot(slot)}}:store`,
  stopKeyPattern: `${CLUSTER_PREFIX}*${CLUSTER_STOP_SUFFIX}`,
  workflowOfStopKey: (key) =>
    key.startsWith(CLUSTER_PREFIX) && key.endsWith(CLUSTER_STOP_SUFFIX) && key.length > CLUSTER_PREFIX.length + CLUSTER_STOP_SUFFIX.length
      ? key.slice(CLUSTER_PREFIX.length, -CLUSTER_STOP_SUFFIX.length)
      : undefined,
};

export function redisKeys(scheme: RedisKeyScheme): RedisKeys {
  return scheme === 'cluster' ? clusterKeys : workhorseKeys;
}

/** Workhorse's lock key of a workflow (what tests and tools outside the backend look at). */
export const lockKey = workhorseKeys.lock;

/** Every lock key a fleet may have left: Workhorse's (longrun's default scheme) and longrun's Cluster scheme (SCAN patterns). */
export const lockKeyPatterns: readonly string[] = [workhorseKeys, clusterKeys].map(({ parts }) => `${parts.lock[0]}*${parts.lock[1]}`);

/** The keyspace-notification pattern for keys matching `keyPattern` in database `db`. */
export function keyspacePattern(db: number, keyPattern: string): string {
  return `__keyspace@${db}__:${keyPattern}`;
}

/** The key a keyspace notice (`__keyspace@<db>__:<key>`) is about. */
export function keyOfKeyspaceChannel(channel: string): string {
  return channel.slice(channel.indexOf('__:') + 3);
}

const FOLLOW_PREFIX = 'longrun:{wf:';
const FOLLOW_EVENTS_SUFFIX = '}:follow:events';

/** Every replica's announcements of the workflows it has followers of. */
export const FOLLOW_INTEREST_CHANNEL = 'longrun:follow:interest';

/**
 * A workflow's follow log: its backlog (a stream; its name is also the channel its appends
 * are published on) and its state (a hash), under the workflow's hash tag, beside its lock.
 */
export function followKeys(workflowId: string): { events: string; state: string } {
  return { events: `${FOLLOW_PREFIX}${workflowId}${FOLLOW_EVENTS_SUFFIX}`, state: `${FOLLOW_PREFIX}${workflowId}}:follow` };
}

/** The workflow whose appends a channel carries, or undefined when it is not a follow log's. */
export function workflowOfFollowChannel(channel: string): string | undefined {
  return channel.startsWith(FOLLOW_PREFIX) && channel.endsWith(FOLLOW_EVENTS_SUFFIX) ? channel.slice(FOLLOW_PREFIX.length, -FOLLOW_EVENTS_SUFFIX.length) : undefined;
}

/** A replica's bridge inbox. Hash-tagged by replica: each is one key, in one slot. */
export function inboxKey(replicaId: string): string {
  return `longrun:{bridge:${replicaId}}:inbox`;
}
