/**
 * A held lock, kept alive while its run lives. The renewing is done by the process's one
 * LeaseKeeper (lease-keeper.ts), which renews every lease due in one batched call a tick;
 * what a Lease sees is the same as when each renewed itself every TTL/3, each renewal one
 * atomic observation of "I still own it" and "I should stop" (renew-leases.lua):
 *
 * - token gone or taken over → onLost('taken') (the run stops with WORKHORSE_LOCK_LOST);
 * - stop flag set → onStop(value);
 * - renewal erroring or unanswered → retried until the lease would expire, then
 *   onLost('expired'), a tenth of the TTL before it can: a run never goes on past an
 *   expiry it could not prevent.
 *
 * The lease holds no timer of its own: the keeper's bookkeeping fields below are what it
 * schedules from.
 */
import type { ActorSlot, LeaseRefresh } from './backend';

export type LeaseState = 'held' | 'lost' | 'released';

export interface LeaseHooks {
  onLost(why: 'taken' | 'expired'): void;
  onStop(value: string): void;
  onRenew?(result: 'ok' | 'error'): void;
  /** What the renewal refreshes in the run record. */
  refresh(): Omit<LeaseRefresh, 'actor'>;
}

/** Who renews and releases leases (the keeper); a Lease hands its release over. */
export interface LeaseOwner {
  release(lease: Lease, runId: string): Promise<boolean>;
}

export class Lease {
  /** held → lost (renewal found the token gone, or could not renew in time) | released. */
  state: LeaseState = 'held';
  /** When the renewal that last confirmed the lock was sent (or the acquire): it lives `ttlMs` from then. */
  confirmedAt: number;
  /** When the next renewal is due (TTL/3 after confirmedAt, or a retry's time). */
  dueAt: number;
  /** When the renewal in flight was sent; 0 when none is. */
  sentAt = 0;
  /** Numbers the renewals sent, so an answer that arrives after its attempt was given up is ignored. */
  attempt = 0;
  private releasing: Promise<boolean> | undefined;

  constructor(
    private readonly owner: LeaseOwner,
    readonly workflowId: string,
    readonly token: string,
    readonly ttlMs: number,
    readonly hooks: LeaseHooks,
    acquiredAt: number,
    /** The actor slot renewed and released with the lock. */
    readonly actor: ActorSlot | undefined,
  ) {
    this.confirmedAt = acquiredAt;
    this.dueAt = acquiredAt + Math.max(1, Math.floor(ttlMs / 3));
  }

  /** How long the lock is sure to live from now (negative once it may have expired). */
  get remainingMs(): number {
    return this.confirmedAt + this.ttlMs - Date.now();
  }

  /**
   * Stops renewing and deletes the lock (and run record, stop key, actor slot) if still
   * ours. Idempotent: every caller gets the same promise. Never rejects: resolves false
   * when the store failed, in which case the keys expire within one TTL.
   */
  release(runId: string): Promise<boolean> {
    this.releasing ??= this.owner.release(this, runId);
    return this.releasing;
  }
}
