/**
 * What the gateway knows of its Redis as a lock store (docs/spec.md §5), as gauges read at each
 * scrape from the coordination backend: the store fence of each primary (how long new locks
 * stay refused), and each primary's maxmemory-policy as read at start (a policy other than
 * noeviction may evict a lock key). Labelled by primary address (a finite set: the Redis
 * servers the gateway is given, pruned to the current primaries) and by policy (Redis's own
 * list, `other` and `unknown`).
 */
import { Gauge, type Registry } from 'prom-client';
import type { PrimaryPolicy } from './eviction-check';
import type { StoreFenceView } from './store-fences';

/** The backend's side (RedisBackend): none with the in-process lock. */
export interface LockStoreState {
  storeFences(): StoreFenceView[];
  maxmemoryPolicies(): readonly PrimaryPolicy[];
}

export class StoreMetrics {
  private source: LockStoreState | undefined;
  readonly fenceSeconds: Gauge;
  readonly maxmemoryPolicy: Gauge;

  constructor(registry: Registry) {
    const read = (): LockStoreState | undefined => this.source;
    this.fenceSeconds = new Gauge({
      name: 'longrun_redis_store_fence_seconds',
      help: 'Seconds the store fence of this Redis primary still refuses new locks (0: none), as its lock and lease scripts last told this replica (docs/spec.md §5).',
      labelNames: ['primary'],
      registers: [registry],
      collect() {
        this.reset();
        for (const fence of read()?.storeFences() ?? []) this.set({ primary: fence.primary }, fence.remainingMs / 1_000);
      },
    });
    this.maxmemoryPolicy = new Gauge({
      name: 'longrun_redis_maxmemory_policy_info',
      help: "Redis primaries by maxmemory-policy, as read once at start (unknown: INFO refused). Any policy but noeviction may evict a workflow's lock key.",
      labelNames: ['policy'],
      registers: [registry],
      collect() {
        this.reset();
        const counts = new Map<string, number>();
        for (const { policy } of read()?.maxmemoryPolicies() ?? []) counts.set(policy, (counts.get(policy) ?? 0) + 1);
        for (const [policy, count] of counts) this.set({ policy }, count);
      },
    });
  }

  /** Reads the store's state from `source` at each scrape. */
  watch(source: LockStoreState): void {
    this.source = source;
  }
}
