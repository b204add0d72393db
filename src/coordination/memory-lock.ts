/**
 * The in-process lock backend (LONGRUN_REDIS_URL unset): one replica, same semantics as
 * Redis (expiry, token-checked renewal and release). Expiry is checked lazily against
 * the injected clock, so it holds no timers.
 */
import type { LockBackend, RenewResult } from './lock-backend';

export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export class MemoryLockBackend implements LockBackend {
  readonly kind = 'memory' as const;
  private readonly locks = new Map<string, { token: string; expiresAt: number }>();
  private readonly stops = new Map<string, { value: string; expiresAt: number }>();

  constructor(private readonly clock: Clock = systemClock) {}

  private live(workflowId: string): { token: string; expiresAt: number } | undefined {
    const held = this.locks.get(workflowId);
    if (held && held.expiresAt <= this.clock.now()) {
      this.locks.delete(workflowId);
      return undefined;
    }
    return held;
  }

  async acquire(workflowId: string, token: string, ttlMs: number): Promise<boolean> {
    if (this.live(workflowId)) return false;
    this.locks.set(workflowId, { token, expiresAt: this.clock.now() + ttlMs });
    return true;
  }

  async renew(workflowId: string, token: string, ttlMs: number): Promise<RenewResult> {
    const held = this.live(workflowId);
    const owned = held?.token === token;
    if (held && owned) held.expiresAt = this.clock.now() + ttlMs;
    const stop = this.stops.get(workflowId);
    const stopValue = stop && stop.expiresAt > this.clock.now() ? stop.value : null;
    return { owned, stop: stopValue };
  }

  async release(workflowId: string, token: string): Promise<void> {
    if (this.live(workflowId)?.token === token) this.locks.delete(workflowId);
  }

  /** The token holding the lock now, if any (for the stop endpoint and tests). */
  holder(workflowId: string): string | undefined {
    return this.live(workflowId)?.token;
  }

  async close(): Promise<void> {
    this.locks.clear();
    this.stops.clear();
  }
}
