/**
 * What admission took for one execute (SPEC §3 order: process slot → lock and actor
 * slot), held by one object that gives it all back once: the launcher while no run
 * exists yet, then the Run, at teardown. `release()` is idempotent and never rejects;
 * what Redis could not take back expires with the lease.
 */
import type { Metrics } from '../metrics';
import type { ActorSlot } from '../coordination/backend';
import type { Lease, LeaseHooks } from '../coordination/lease';
import type { LeaseKeeper } from '../coordination/lease-keeper';
import type { RunRegistry } from './registry';

/** The workflow's lock as admission took it. */
export interface HeldLock {
  token: string;
  /** When the acquire was sent: the lock lives at least one TTL from then. */
  acquiredAt: number;
  /** Taken with the lock when the actor is capped. */
  actor?: ActorSlot;
}

export class Reservation {
  private lease: Lease | undefined;
  private releasing: Promise<void> | undefined;

  constructor(
    /** The process's lease keeper renews the lock and releases it (batched with other runs'). */
    private readonly deps: { leases: LeaseKeeper; metrics: Metrics; registry: RunRegistry },
    readonly workflowId: string,
    /** Whether a detached run slot of this process was taken (blocking runs take none). */
    private readonly slot: boolean,
    /** Absent: a blocking run without LockConcurrentFlow, or one going on without Redis. */
    readonly lock: HeldLock | undefined,
  ) {}

  /**
   * Starts renewing the lock for the run that now holds it (the process's LeaseKeeper
   * renews it, every TTL/3, batched with every other lease); undefined when there is no
   * lock. Called once, by the Run.
   */
  keepAlive(hooks: LeaseHooks): Lease | undefined {
    if (!this.lock || this.lease || this.releasing) return this.lease;
    this.lease = this.deps.leases.hold(this.workflowId, this.lock, hooks);
    return this.lease;
  }

  /**
   * Gives everything back: the lock (compare-and-delete, with the run record when it is
   * `runId`'s and the stop key when the lock was ours), the actor slot, the process slot.
   * Idempotent: every caller gets the same promise.
   */
  release(runId = ''): Promise<void> {
    this.releasing ??= (async () => {
      const lock = this.lock;
      try {
        if (lock) {
          const released = this.lease
            ? await this.lease.release(runId)
            : await this.deps.leases.releaseLock({ workflowId: this.workflowId, token: lock.token, runId, ...(lock.actor ? { actor: lock.actor } : {}) });
          this.deps.metrics.lock('release', released ? 'ok' : 'error');
        }
      } finally {
        if (this.slot) this.deps.registry.releaseDetached();
      }
    })();
    return this.releasing;
  }
}
