/**
 * A held lock, kept alive while its run lives. The renewing is done by the process's one
 * LeaseKeeper (lease-keeper.ts), which renews every lease due in one batched call a tick;
 * each renewal is one atomic observation of "I still own it" and "I should stop"
 * (renew-leases-1.lua), and the lease tells its hooks (the run's coordination) what it saw:
 *
 * - token gone or taken over → onLost('taken') (the run stops: lock_lost);
 * - the lock missing because the store lost its data (under the store fence) → re-created
 *   for the token, onReasserted(): the run goes on;
 * - stop flag set → onStop(value);
 * - renewal erroring or unanswered → retried until the lease would expire, then
 *   onLost('expired'), a tenth of the TTL before it can: a run never goes on past an
 *   expiry it could not prevent.
 *
 * The lease holds no timer of its own. Its schedule (when it was last confirmed, when the
 * next renewal is due, the attempt in flight) is its own state, moved only by its methods,
 * which the keeper calls as renewals go out and come back.
 */
import type { ActorSlot, LeaseRefresh } from './backend';

export type LeaseState = 'held' | 'lost' | 'released';

/** The workflow's lock as admission took it. */
export interface HeldLock {
  token: string;
  /** When the acquire was sent: the lock lives at least one TTL from then. */
  acquiredAt: number;
  /** Taken with the lock when the actor is capped; renewed and released with it. */
  actor?: ActorSlot;
}

/** Who is told what renewals see, and what they write to the run record. */
export interface LeaseHooks {
  onLost(why: 'taken' | 'expired'): void;
  onStop(value: string): void;
  onRenew?(result: 'ok' | 'error'): void;
  /** A renewal re-created the lock the store had lost (under its fence): the run goes on; what went with the data is written again. */
  onReasserted?(): void;
  /** What the renewal refreshes in the run record. */
  refresh(): Omit<LeaseRefresh, 'actor'>;
}

/** Who renews and releases leases (the keeper): a released lease is handed over to it. */
export interface LeaseOwner {
  release(lease: Lease, runId: string): Promise<boolean>;
}

export class Lease {
  private currentState: LeaseState = 'held';
  private confirmed: number;
  private due: number;
  private sent = 0;
  private attempts = 0;
  private releasing: Promise<boolean> | undefined;

  constructor(
    private readonly owner: LeaseOwner,
    readonly workflowId: string,
    readonly lock: HeldLock,
    readonly ttlMs: number,
    readonly hooks: LeaseHooks,
    /** How long after a confirming renewal the next one is due. */
    private readonly intervalMs: number,
  ) {
    this.confirmed = lock.acquiredAt;
    this.due = lock.acquiredAt + intervalMs;
  }

  get state(): LeaseState {
    return this.currentState;
  }

  /** When the renewal that last confirmed the lock was sent (or the acquire): it lives `ttlMs` from then. */
  get confirmedAt(): number {
    return this.confirmed;
  }

  /** When the next renewal is due (an interval after confirmedAt, or a retry's time). */
  get dueAt(): number {
    return this.due;
  }

  /** When the renewal in flight was sent; 0 when none is. */
  get sentAt(): number {
    return this.sent;
  }

  /** How long the lock is sure to live from now (negative once it may have expired). */
  get remainingMs(): number {
    return this.confirmed + this.ttlMs - Date.now();
  }

  /** A renewal goes out at `at`; returns its attempt number, to recognise its answer. */
  renewalSent(at: number): number {
    this.sent = at;
    this.attempts += 1;
    return this.attempts;
  }

  /**
   * Whether an answer to `attempt` still counts: the lease is held, no later attempt went
   * out, and this one is still in flight (not answered already, nor given up).
   */
  awaits(attempt: number): boolean {
    return this.currentState === 'held' && this.attempts === attempt && this.sent !== 0;
  }

  /** The renewal sent at `sentAt` confirmed the lock: it lives a TTL from then. */
  renewed(sentAt: number): void {
    this.sent = 0;
    this.confirmed = sentAt;
    this.due = sentAt + this.intervalMs;
  }

  /** The renewal in flight failed or was given up (a late answer is ignored); the next is due at `retryAt`. */
  renewalFailed(retryAt: number): void {
    this.sent = 0;
    this.attempts += 1;
    this.due = retryAt;
  }

  /** The keeper found the lock gone or beyond saving: no more renewals, the hooks are told. */
  lost(why: 'taken' | 'expired'): void {
    this.currentState = 'lost';
    this.sent = 0;
    this.hooks.onLost(why);
  }

  /**
   * Stops renewing and deletes the lock (and run record, stop key, actor slot) if still
   * ours. Idempotent: every caller gets the same promise. Never rejects: resolves false
   * when the store failed, in which case the keys expire within one TTL.
   */
  release(runId: string): Promise<boolean> {
    if (!this.releasing) {
      this.currentState = 'released';
      this.releasing = this.owner.release(this, runId);
    }
    return this.releasing;
  }
}
