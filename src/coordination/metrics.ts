/**
 * The coordination store's metrics (docs/operating.md "Coordination"): lock operations and
 * their results, batched lease work, late renewals, runs started without the lock, the Redis
 * connections' events, and what the store itself says (store-metrics.ts).
 */
import { Counter, Histogram, type Registry } from 'prom-client';
import { PartMetrics } from '../observability/metric-helpers';
import { redisConnections, redisEvents, type RedisConnection, type RedisEvent } from '../redis/words';
import { StoreMetrics } from './store-metrics';
import { leaseBatchOps, lockOutcomes, type LeaseBatchOp, type LockOp, type LockResult } from './words';

export class CoordinationMetrics extends PartMetrics {
  readonly lockOperations = new Counter({
    name: 'longrun_lock_operations_total',
    help: 'Lock operations, by op and result.',
    labelNames: ['op', 'result'],
    registers: [this.registry],
  });
  readonly leaseBatchDuration = new Histogram({
    name: 'longrun_lease_batch_duration_seconds',
    help: 'Batched lease work sent to the coordination store (one renewal batch per keeper tick, one release batch per turn of the event loop), sent to answered, by op.',
    labelNames: ['op'],
    // A batch is a script call or a few: about a millisecond; the command timeout (2 s) bounds it.
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly leaseBatchLeases = new Histogram({
    name: 'longrun_lease_batch_leases',
    help: 'Leases in one batch of lease work, by op.',
    labelNames: ['op'],
    // From one lease to a drain of the whole process (LONGRUN_MAX_DETACHED_RUNS, 10 000).
    buckets: [1, 5, 25, 100, 250, 500, 1000, 2500, 5000, 10000],
    registers: [this.registry],
  });
  readonly lateRenewals = new Counter({
    name: 'longrun_lease_renewals_late_total',
    help: 'Lease renewals confirmed more than one keeper tick after they were due (TTL/3 after the previous confirmation): the process or the store is falling behind.',
    registers: [this.registry],
  });
  readonly unlockedRuns = new Counter({
    name: 'longrun_unlocked_runs_total',
    help: 'Blocking runs started without the lock because Redis failed (Workhorse parity).',
    registers: [this.registry],
  });
  readonly redisEvents = new Counter({
    name: 'longrun_redis_connection_events_total',
    help: 'Events of the connections to the coordination store (Redis), by connection and event.',
    labelNames: ['connection', 'event'],
    registers: [this.registry],
  });
  /** The Redis lock store: each primary's fence and maxmemory-policy (store-metrics.ts). */
  readonly store = new StoreMetrics(this.registry);

  constructor(registry: Registry) {
    super(registry);
    for (const [op, result] of lockOutcomes) this.lockOperations.inc({ op, result }, 0);
    for (const op of leaseBatchOps) {
      this.leaseBatchDuration.zero({ op });
      this.leaseBatchLeases.zero({ op });
    }
    for (const connection of redisConnections) for (const event of redisEvents) this.redisEvents.inc({ connection, event }, 0);
  }

  lock(op: LockOp, result: LockResult): void {
    this.lockOperations.inc({ op, result });
  }

  /** One batch of lease work (lease-keeper.ts): how many leases, how long the store took. */
  leaseBatch(op: LeaseBatchOp, leases: number, durationS: number): void {
    this.leaseBatchDuration.observe({ op }, durationS);
    this.leaseBatchLeases.observe({ op }, leases);
  }

  redisEvent(connection: RedisConnection, event: RedisEvent): void {
    this.redisEvents.inc({ connection, event });
  }
}
