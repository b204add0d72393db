/**
 * What replicas share (docs/spec.md §5): each workflow's lock and lease, its stop signal, its
 * run record, and per-actor run slots. Two implementations keep the same semantics:
 * Redis (several replicas) and this process (LONGRUN_REDIS_URL unset).
 *
 * Every method throws CoordinationError when the store fails (unreachable, erroring),
 * as opposed to answering "taken" / "not owned".
 */
import type { RunRecord } from '@longrun/client';
import type { StoreFence } from '../core/vocabulary';

export class CoordinationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CoordinationError';
  }
}

/**
 * The store fence is up (store-fence.lua): the store grants no new lock for `retryAfterMs`,
 * until every lease that could still be alive has expired or been re-asserted by its
 * holder. `why`: `new`, a Redis without longrun's marker not a lease TTL old yet; `lost`,
 * the store lost its data moments ago (a restart, a failover to a replica that had not
 * received the last writes, a flush). Not a CoordinationError: the store answered, and a
 * run that goes on without the lock now could run beside a live one.
 */
export class LockStoreFenced extends Error {
  constructor(
    readonly retryAfterMs: number,
    readonly why: StoreFence,
  ) {
    super(why === 'new' ? `the lock store is new: no new lock for ${retryAfterMs} ms` : `the lock store lost its data: no new lock for ${retryAfterMs} ms`);
    this.name = 'LockStoreFenced';
  }
}

/** One atomic observation made by a renewal: "I still own it" and "I should stop". */
export interface RenewResult {
  owned: boolean;
  /**
   * The lock was missing under the store fence and is the token's again (owned too): the
   * run record went with the store's data and must be written again.
   */
  reasserted?: boolean;
  /** The stop key's value when the owner asked this workflow's run to stop, else null. */
  stop: string | null;
}

/**
 * The run record hash (`workhorse:duoworkflow:run:<id>`): the record the internal route
 * answers (the client's RunRecord), less the workflow id its key names, and with
 * `in_flight` as the JSON text of the list.
 */
export type StoredRunRecord = Omit<RunRecord, 'workflow_id' | 'in_flight'> & {
  /** JSON list of the run's relayed actions still unanswered (docs/spec.md §6), as of the last renewal; absent when written by an older replica. */
  in_flight?: string;
};

/** A per-actor run slot, named by the lock's token (docs/spec.md §3b per-actor cap). */
export interface ActorSlot {
  actorId: string;
  member: string;
}

/** The run record's fields a renewal rewrites. */
export interface RecordRefresh {
  state: string;
  lastActionAt: string;
  /** The run record's `in_flight` (JSON text); left as it is when absent. */
  inFlight?: string;
}

/** What a lease renewal refreshes besides the lock. */
export interface LeaseRefresh {
  /** The run whose record is refreshed (another run's record is left alone). */
  runId: string;
  /**
   * Fields to write; absent when none changed since the record was last written, so the
   * renewal only extends the record's TTL (an idle run's renewals send no fields).
   */
  record?: RecordRefresh;
  actor?: ActorSlot;
}

/** One lease of a batched renewal. */
export interface LeaseRenewal {
  workflowId: string;
  token: string;
  refresh: LeaseRefresh;
}

/** One lease's answer in a batched renewal: its observation, or why it could not be made. */
export type RenewOutcome = RenewResult | CoordinationError;

/** One lock of a batched release. */
export interface LockRelease {
  workflowId: string;
  token: string;
  /** The run record is deleted only when it is this run's ('' for none). */
  runId: string;
  actor?: ActorSlot;
}

/** One lock's answer in a batched release: null once done, else why it could not be. */
export type ReleaseOutcome = CoordinationError | null;

export interface CoordinationBackend {
  readonly kind: 'redis' | 'memory';
  /**
   * SET NX PX: takes the lock for ttlMs when free, deleting a stale stop key with it (the
   * lock was free, so the key addressed no run in flight); false when another token holds
   * it. Throws LockStoreFenced while the store grants no lock (it is new, or lost its data moments ago).
   */
  acquire(workflowId: string, token: string, ttlMs: number): Promise<boolean>;
  /**
   * Extends the lease only while `token` still holds it, refreshes the run record and
   * actor slot with it, and reads the stop flag — one round trip.
   */
  renew(workflowId: string, token: string, ttlMs: number, refresh: LeaseRefresh): Promise<RenewResult>;
  /**
   * `renew` for many leases at once, in as few round trips as the store allows (one script
   * call per Redis primary and per batch of leases): what a process's lease keeper sends
   * each tick. Each lease gets exactly the observation `renew` would make; a part of the
   * batch the store could not run (a primary down) answers CoordinationError for its
   * leases alone. Rejects only when nothing could be sent. `answered` hears each lease's
   * outcome as soon as its part is answered (index into `leases`), so that a primary that
   * stopped answering holds back only its own leases' confirmations, not the others'.
   */
  renewMany(ttlMs: number, leases: readonly LeaseRenewal[], answered?: (index: number, outcome: RenewOutcome) => void): Promise<RenewOutcome[]>;
  /**
   * Compare-and-delete: deletes the lock when `token` holds it, the run record when it is
   * `runId`'s, the stop key when the lock was ours, and the actor slot.
   */
  release(workflowId: string, token: string, runId: string, actor?: ActorSlot): Promise<void>;
  /** `release` for many locks at once (runs ending together, as in a drain); per-lock outcomes as renewMany. */
  releaseMany(releases: readonly LockRelease[]): Promise<ReleaseOutcome[]>;
  /** The stop key's value, or null. */
  readStop(workflowId: string): Promise<string | null>;
  /** Deletes the stop key (the run acting on it, or a stale one at admission). */
  clearStop(workflowId: string): Promise<void>;
  /**
   * The owner's stop request: sets the stop key (TTL ttlMs) and notifies replicas, only
   * when a run holds the workflow's lock. Returns false (and sets nothing) when none does.
   */
  requestStop(workflowId: string, value: string, ttlMs: number): Promise<boolean>;
  writeRunRecord(workflowId: string, record: StoredRunRecord, ttlMs: number): Promise<void>;
  readRunRecord(workflowId: string): Promise<StoredRunRecord | null>;
  /** Takes one of `max` slots for the actor (entries expire after ttlMs unless renewed). */
  acquireActorSlot(actorId: string, member: string, max: number, ttlMs: number): Promise<boolean>;
  releaseActorSlot(actorId: string, member: string): Promise<void>;
  /** Subscribes to stop notices (pub/sub); the handler gets the workflow id. */
  onStopNotice(handler: (workflowId: string) => void): void;
  /** Reads many stop keys at once (the poller). */
  readStops(workflowIds: string[]): Promise<Array<string | null>>;
  /** Closes gracefully (queued commands are answered first). Idempotent. */
  close(): Promise<void>;
  /** Drops every connection now, answered or not; nothing reconnects. */
  destroy(): void;
}
