/**
 * The store marker (store-fence.lua) from outside a gateway: marking a Redis one knows to be
 * new. A gateway cannot tell a new, empty store from one that lost its data, so its first
 * locks on an unmarked store are refused for one lease TTL. Whoever has just created the
 * server (a test, a benchmark, the demo's throwaway redis-server, an operator provisioning
 * an empty database before any gateway uses it) may mark it instead. Never on a store a
 * fleet may have held locks in: that is the loss the fence exists for.
 */
import type { Redis } from 'ioredis';
import { workhorseKeys } from './keys';

/** Names the server that answers as the one that wrote the marker, with no fence up. */
const MARK = "redis.call('HSET', KEYS[1], 'run_id', string.match(redis.call('INFO', 'server'), 'run_id:(%w+)'), 'fenced_until', 0)";

/** Marks a new primary (`key`: its marker; on a Cluster, clusterKeys.storeMarker of its lowest slot, sent to that node). */
export async function markNewStore(redis: Pick<Redis, 'eval'>, key: string = workhorseKeys.storeMarker(0)): Promise<void> {
  await redis.eval(MARK, 1, key);
}
