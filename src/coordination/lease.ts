/**
 * A held lock, kept alive: renewed every TTL/3 while the run lives. Each renewal is one
 * atomic observation of "I still own it" and "I should stop" (renew-lease.lua), and
 * refreshes the run record and actor slot with the lock.
 *
 * - token gone or taken over → onLost('taken') (the run stops with WORKHORSE_LOCK_LOST);
 * - stop flag set → onStop(value);
 * - renewal erroring → retried until the lease would expire, then onLost('expired'): a
 *   run never goes on past an expiry it could not prevent.
 */
import type { ActorSlot, CoordinationBackend, LeaseRefresh } from './backend';

export type LeaseState = 'held' | 'lost' | 'released';

export interface LeaseHooks {
  onLost(why: 'taken' | 'expired'): void;
  onStop(value: string): void;
  onRenew?(result: 'ok' | 'error'): void;
  /** What the renewal refreshes in the run record. */
  refresh(): Omit<LeaseRefresh, 'actor'>;
}

/** What a lease needs of the coordination store (tests swap it for a fake). */
export type LeaseBackend = Pick<CoordinationBackend, 'renew' | 'release'>;

export class Lease {
  private state: LeaseState = 'held';
  private timer: NodeJS.Timeout | undefined;
  /** When the last successful renewal (or the acquire) was sent: the lock lives at least ttl from it. */
  private confirmedAt: number;
  private releasing: Promise<boolean> | undefined;

  constructor(
    private readonly backend: LeaseBackend,
    readonly workflowId: string,
    readonly token: string,
    private readonly ttlMs: number,
    private readonly hooks: LeaseHooks,
    acquiredAt: number = Date.now(),
    /** The actor slot renewed and released with the lock. */
    private readonly actor?: ActorSlot,
  ) {
    this.confirmedAt = acquiredAt;
    this.schedule(this.interval);
  }

  /** How long the lock is sure to live from now (negative once it may have expired). */
  get remainingMs(): number {
    return this.confirmedAt + this.ttlMs - Date.now();
  }

  private get interval(): number {
    return Math.max(1, Math.floor(this.ttlMs / 3));
  }

  private schedule(delayMs: number): void {
    if (this.state !== 'held') return;
    this.timer = setTimeout(() => void this.renew(), delayMs);
  }

  private async renew(): Promise<void> {
    if (this.state !== 'held') return;
    const sentAt = Date.now();
    const margin = Math.max(1, Math.floor(this.ttlMs / 10));
    let deadline: NodeJS.Timeout | undefined;
    try {
      // A renewal stuck past the lease's end is as good as failed: bound it by what is left.
      const result = await Promise.race([
        this.backend.renew(this.workflowId, this.token, this.ttlMs, this.actor ? { ...this.hooks.refresh(), actor: this.actor } : this.hooks.refresh()),
        new Promise<never>((_resolve, reject) => {
          deadline = setTimeout(() => reject(new Error('renewal timed out')), Math.max(1, this.remainingMs - margin));
        }),
      ]);
      if (this.state !== 'held') return;
      if (!result.owned) {
        this.state = 'lost';
        this.hooks.onLost('taken');
        return;
      }
      this.confirmedAt = sentAt;
      this.hooks.onRenew?.('ok');
      if (result.stop !== null) this.hooks.onStop(result.stop);
      this.schedule(this.interval);
    } catch {
      if (this.state !== 'held') return;
      this.hooks.onRenew?.('error');
      // Give up while a margin of the lease is left, so the run is stopped before a
      // second holder can take the key.
      const left = this.remainingMs - margin;
      if (left <= 0) {
        this.state = 'lost';
        this.hooks.onLost('expired');
        return;
      }
      this.schedule(Math.min(left, margin));
    } finally {
      clearTimeout(deadline);
    }
  }

  /**
   * Stops renewing and deletes the lock (and run record, stop key, actor slot) if still
   * ours. Idempotent: every caller gets the same promise. Never rejects: resolves false
   * when the backend failed, in which case the keys expire within one TTL.
   */
  release(runId: string): Promise<boolean> {
    this.releasing ??= (async () => {
      clearTimeout(this.timer);
      this.state = 'released';
      try {
        await this.backend.release(this.workflowId, this.token, runId, this.actor);
        return true;
      } catch {
        return false;
      }
    })();
    return this.releasing;
  }
}
