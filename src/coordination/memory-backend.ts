/**
 * The in-process coordination backend (LONGRUN_REDIS_URL unset): one replica, the same
 * semantics as Redis — expiry, token-checked renewal and release, stop keys with a TTL,
 * run records, actor slots. Expiry is checked lazily against the clock, so it holds no
 * timers.
 */
import type { ActorSlot, CoordinationBackend, LeaseRefresh, LeaseRenewal, LockRelease, ReleaseOutcome, RenewOutcome, RenewResult, StoredRunRecord } from './backend';

export interface Clock {
  now(): number;
}

const systemClock: Clock = { now: () => Date.now() };

interface Expiring<T> {
  value: T;
  expiresAt: number;
}

class ExpiringMap<T> {
  private readonly entries = new Map<string, Expiring<T>>();

  constructor(private readonly clock: Clock) {}

  get(key: string): T | undefined {
    const entry = this.entries.get(key);
    if (entry && entry.expiresAt <= this.clock.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry?.value;
  }

  set(key: string, value: T, ttlMs: number): void {
    this.entries.set(key, { value, expiresAt: this.clock.now() + ttlMs });
  }

  expire(key: string, ttlMs: number): void {
    const entry = this.entries.get(key);
    if (entry) entry.expiresAt = this.clock.now() + ttlMs;
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }
}

export class MemoryBackend implements CoordinationBackend {
  readonly kind = 'memory' as const;
  private readonly locks: ExpiringMap<string>;
  private readonly stops: ExpiringMap<string>;
  private readonly records: ExpiringMap<StoredRunRecord>;
  private readonly actors = new Map<string, Map<string, number>>();
  private readonly stopHandlers: Array<(workflowId: string) => void> = [];

  constructor(private readonly clock: Clock = systemClock) {
    this.locks = new ExpiringMap(clock);
    this.stops = new ExpiringMap(clock);
    this.records = new ExpiringMap(clock);
  }

  async acquire(workflowId: string, token: string, ttlMs: number): Promise<boolean> {
    if (this.locks.get(workflowId) !== undefined) return false;
    this.locks.set(workflowId, token, ttlMs);
    this.stops.delete(workflowId);
    return true;
  }

  async renew(workflowId: string, token: string, ttlMs: number, refresh: LeaseRefresh): Promise<RenewResult> {
    const owned = this.locks.get(workflowId) === token;
    if (owned) {
      this.locks.expire(workflowId, ttlMs);
      const record = this.records.get(workflowId);
      if (record?.run_id === refresh.runId) {
        const fields = refresh.record;
        const changed = fields ? { state: fields.state, last_action_at: fields.lastActionAt, ...(fields.inFlight === undefined ? {} : { in_flight: fields.inFlight }) } : {};
        this.records.set(workflowId, { ...record, ...changed }, ttlMs);
      }
      if (refresh.actor) this.actorSlots(refresh.actor.actorId).set(refresh.actor.member, this.clock.now() + ttlMs);
    }
    return { owned, stop: this.stops.get(workflowId) ?? null };
  }

  /** Each lease as `renew` (this store cannot fail part of a batch). */
  async renewMany(ttlMs: number, leases: readonly LeaseRenewal[]): Promise<RenewOutcome[]> {
    return Promise.all(leases.map(({ workflowId, token, refresh }) => this.renew(workflowId, token, ttlMs, refresh)));
  }

  async releaseMany(releases: readonly LockRelease[]): Promise<ReleaseOutcome[]> {
    for (const { workflowId, token, runId, actor } of releases) await this.release(workflowId, token, runId, actor);
    return releases.map(() => null);
  }

  async release(workflowId: string, token: string, runId: string, actor?: ActorSlot): Promise<void> {
    if (this.records.get(workflowId)?.run_id === runId) this.records.delete(workflowId);
    if (this.locks.get(workflowId) === token) {
      this.locks.delete(workflowId);
      this.stops.delete(workflowId);
    }
    if (actor) this.actorSlots(actor.actorId).delete(actor.member);
  }

  /** The token holding the lock now, if any (for tests). */
  holder(workflowId: string): string | undefined {
    return this.locks.get(workflowId);
  }

  async readStop(workflowId: string): Promise<string | null> {
    return this.stops.get(workflowId) ?? null;
  }

  async readStops(workflowIds: string[]): Promise<Array<string | null>> {
    return workflowIds.map((id) => this.stops.get(id) ?? null);
  }

  async clearStop(workflowId: string): Promise<void> {
    this.stops.delete(workflowId);
  }

  async requestStop(workflowId: string, value: string, ttlMs: number): Promise<boolean> {
    if (this.locks.get(workflowId) === undefined) return false;
    this.stops.set(workflowId, value, ttlMs);
    // Like a pub/sub notice: delivered after the caller's turn, never inside it.
    queueMicrotask(() => {
      for (const handler of this.stopHandlers) handler(workflowId);
    });
    return true;
  }

  async writeRunRecord(workflowId: string, record: StoredRunRecord, ttlMs: number): Promise<void> {
    this.records.set(workflowId, { ...record }, ttlMs);
  }

  async readRunRecord(workflowId: string): Promise<StoredRunRecord | null> {
    return this.records.get(workflowId) ?? null;
  }

  private actorSlots(actorId: string): Map<string, number> {
    let slots = this.actors.get(actorId);
    if (!slots) {
      slots = new Map();
      this.actors.set(actorId, slots);
    }
    const now = this.clock.now();
    for (const [member, expiresAt] of slots) if (expiresAt <= now) slots.delete(member);
    return slots;
  }

  async acquireActorSlot(actorId: string, member: string, max: number, ttlMs: number): Promise<boolean> {
    const slots = this.actorSlots(actorId);
    if (!slots.has(member) && slots.size >= max) return false;
    slots.set(member, this.clock.now() + ttlMs);
    return true;
  }

  async releaseActorSlot(actorId: string, member: string): Promise<void> {
    this.actorSlots(actorId).delete(member);
  }

  onStopNotice(handler: (workflowId: string) => void): void {
    this.stopHandlers.push(handler);
  }

  destroy(): void {
    void this.close();
  }

  async close(): Promise<void> {
    this.stopHandlers.length = 0;
    this.locks.clear();
    this.stops.clear();
    this.records.clear();
    this.actors.clear();
  }
}
