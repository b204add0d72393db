/**
 * The process's lease keeper: one timer, and one batched renewal a tick for every lease
 * due (bullmq's lock-manager.ts and its extendLocks are the model). Ten thousand runs
 * held cost Redis one script call a second, not five hundred.
 *
 * Each tick (every TTL/20, at most a second) the keeper
 * - reports lost ('expired') every lease whose renewal could not be confirmed in time: a
 *   tenth of the TTL before the lock may expire, whatever its batch is doing (erroring,
 *   hung, or not yet sent because the process was busy);
 * - gives up renewals unanswered for half a renewal interval (TTL/6; the store's own
 *   command timeout, 2 s by default, usually answers first) and retries them;
 * - sends, in one `renewMany`, every lease due before the next tick: a lease is renewed
 *   TTL/3 after the renewal that last confirmed it, at most one tick early, never late
 *   while the event loop keeps time. Each part of a batch (one per Redis primary) is acted
 *   on as it is answered: a primary that stopped answering holds back its own leases only.
 *
 * Per lease the answer means: token gone → onLost('taken'); stop flag → onStop(value); the
 * lock re-created under the store fence → onReasserted(); an
 * error → onRenew('error') and a retry a tenth of the TTL later. The
 * lock is known to live TTL from when the confirming renewal was *sent*, so `remainingMs`
 * never overstates it. A lease added or released while a batch is in flight is simply in
 * the next one, or out of it (a late answer for a released lease fires nothing).
 */
import { CoordinationError, type CoordinationBackend, type LockRelease, type RenewOutcome } from './backend';
import { Lease, type HeldLock, type LeaseHooks, type LeaseOwner } from './lease';
import { LockReleaser, type BatchObserver } from './lock-releaser';

/** What the keeper needs of the coordination store (tests swap it for a fake). */
export type LeaseBackend = Pick<CoordinationBackend, 'renewMany' | 'releaseMany'>;

export interface LeaseKeeperOptions {
  /** LONGRUN_LEASE_TTL_MS: every lease's TTL. */
  ttlMs: number;
  /** Told of every renewal and release batch (metrics). */
  onBatch?: BatchObserver;
  /**
   * Told of every renewal confirmed more than one tick after it was due (TTL/3 after the
   * previous confirmation): the process or Redis is falling behind.
   */
  onLate?(): void;
}

export class LeaseKeeper implements LeaseOwner {
  /** How often the keeper looks at its leases: TTL/20, at most 1 s (at least 1 ms). */
  readonly tickMs: number;
  /** A lease is renewed this long after the renewal that last confirmed it. */
  readonly intervalMs: number;
  /**
   * A lease not confirmed this long before it may expire is reported lost; a failed
   * renewal is retried this much later.
   */
  readonly marginMs: number;
  /** A renewal unanswered this long is given up (and retried). */
  readonly attemptTimeoutMs: number;
  private readonly ttlMs: number;
  private readonly leases = new Set<Lease>();
  private readonly releaser: LockReleaser;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly backend: LeaseBackend,
    private readonly options: LeaseKeeperOptions,
  ) {
    this.ttlMs = options.ttlMs;
    this.intervalMs = Math.max(1, Math.floor(options.ttlMs / 3));
    this.marginMs = Math.max(1, Math.floor(options.ttlMs / 10));
    this.attemptTimeoutMs = Math.max(1, Math.floor(options.ttlMs / 6));
    // Half the margin at most, so a lease is reported lost before it expires even when the
    // check comes a whole tick after its deadline.
    this.tickMs = Math.max(1, Math.min(1_000, Math.floor(options.ttlMs / 20)));
    this.releaser = new LockReleaser(backend, options.onBatch);
  }

  /** Leases held now. */
  get size(): number {
    return this.leases.size;
  }

  /** Starts keeping a lock alive for the run that holds it. */
  hold(workflowId: string, lock: HeldLock, hooks: LeaseHooks): Lease {
    const lease = new Lease(this, workflowId, lock, this.ttlMs, hooks, this.intervalMs);
    this.leases.add(lease);
    if (!this.closed && !this.timer) {
      this.timer = setInterval(() => this.tick(), this.tickMs);
      // The process's life is its listeners' and runs', never this timer's.
      this.timer.unref();
    }
    return lease;
  }

  /** Lease.release: out of the renewals, then into the next release batch. */
  release(lease: Lease, runId: string): Promise<boolean> {
    this.forget(lease);
    const { token, actor } = lease.lock;
    return this.releaser.release({ workflowId: lease.workflowId, token, runId, ...(actor ? { actor } : {}) });
  }

  /** Releases a lock no lease keeps (a start that failed before its run existed), in the same batches. */
  releaseLock(release: LockRelease): Promise<boolean> {
    return this.releaser.release(release);
  }

  /**
   * Redis is back after an outage: every lease not being renewed now is renewed at once. A
   * store that lost its data (a restart without persistence, a failover to a replica that
   * had not caught up) is fenced by the first lock or lease script that sees it, and a
   * lease renewed under the fence re-creates its lost lock (renew-leases-1.lua): sent now,
   * the holders have their locks back within a round trip, not a renewal interval later.
   * A lease this process can no longer vouch for (it may have expired) is never sent: it
   * is lost here, so only a lock that cannot have expired is ever re-created.
   */
  renewAll(): void {
    if (this.closed) return;
    const now = Date.now();
    const due: Lease[] = [];
    for (const lease of this.leases) {
      if (this.expired(lease, now)) this.lose(lease, 'expired');
      else if (lease.sentAt === 0) due.push(lease);
    }
    if (due.length > 0) void this.renew(due, now);
  }

  /** Whether a lease may have expired by `now` (its last confirmation more than a TTL less the margin ago). */
  private expired(lease: Lease, now: number): boolean {
    return now >= lease.confirmedAt + this.ttlMs - this.marginMs;
  }

  /** Stops renewing (the process is leaving); releases still go out. Idempotent. */
  close(): void {
    this.closed = true;
    this.stopTimer();
  }

  private forget(lease: Lease): void {
    this.leases.delete(lease);
    if (this.leases.size === 0) this.stopTimer();
  }

  private stopTimer(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    const now = Date.now();
    const due: Lease[] = [];
    for (const lease of this.leases) {
      if (this.expired(lease, now)) {
        this.lose(lease, 'expired');
        continue;
      }
      if (lease.sentAt !== 0) {
        if (now - lease.sentAt < this.attemptTimeoutMs) continue;
        this.failed(lease, now);
      }
      if (lease.dueAt <= now + this.tickMs) due.push(lease);
    }
    if (due.length > 0) void this.renew(due, now);
  }

  private async renew(batch: Lease[], sentAt: number): Promise<void> {
    const attempts = batch.map((lease) => lease.renewalSent(sentAt));
    const items = batch.map(({ workflowId, lock, hooks }) => ({
      workflowId,
      token: lock.token,
      refresh: lock.actor ? { ...hooks.refresh(), actor: lock.actor } : hooks.refresh(),
    }));
    const started = performance.now();
    // Each lease's outcome is acted on as soon as its part of the batch is answered (a
    // Cluster sends one call per primary): a primary that hangs delays only its own leases.
    // The pass over the whole batch below then finds those leases no longer awaiting.
    const settle = (i: number, outcome: RenewOutcome | undefined, answeredAt: number): void => this.settle(batch[i] as Lease, attempts[i] as number, outcome, sentAt, answeredAt);
    let outcomes: RenewOutcome[];
    try {
      outcomes = await this.backend.renewMany(this.ttlMs, items, (i, outcome) => settle(i, outcome, Date.now()));
    } catch (err) {
      const error = err instanceof CoordinationError ? err : new CoordinationError('renewal failed', { cause: err });
      outcomes = batch.map(() => error);
    }
    const answeredAt = Date.now();
    this.options.onBatch?.('renew', batch.length, (performance.now() - started) / 1_000, outcomes.some((o) => o instanceof Error) ? 'error' : 'ok');
    batch.forEach((_, i) => settle(i, outcomes[i], answeredAt));
  }

  /** One lease's renewal answered (`attempt`: the renewal it answers, sent at `sentAt`). */
  private settle(lease: Lease, attempt: number, outcome: RenewOutcome | undefined, sentAt: number, answeredAt: number): void {
    // Released, lost, given up (and maybe sent again), or already answered: this answer is stale.
    if (!lease.awaits(attempt)) return;
    if (outcome === undefined || outcome instanceof Error) {
      this.failed(lease, answeredAt);
      return;
    }
    if (!outcome.owned) {
      this.lose(lease, 'taken');
      return;
    }
    if (answeredAt > lease.confirmedAt + this.intervalMs + this.tickMs) this.options.onLate?.();
    lease.renewed(sentAt);
    lease.hooks.onRenew?.('ok');
    if (outcome.reasserted) lease.hooks.onReasserted?.();
    if (outcome.stop !== null) lease.hooks.onStop(outcome.stop);
  }

  /** A renewal that errored or went unanswered: retried a margin later, or the lease is lost. */
  private failed(lease: Lease, now: number): void {
    // An answer to the attempt given up, should it still come, is ignored.
    lease.renewalFailed(now + this.marginMs);
    lease.hooks.onRenew?.('error');
    if (this.expired(lease, now)) this.lose(lease, 'expired');
  }

  private lose(lease: Lease, why: 'taken' | 'expired'): void {
    this.forget(lease);
    lease.lost(why);
  }
}
