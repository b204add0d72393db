/**
 * Everything one run holds outside its stream, in one object (docs/spec.md §5): the
 * workflow's lock and its lease, the stop watching and the stop check before each
 * action, the run record, the per-actor and process slots — and their release, once.
 *
 * Admission makes it (lock and slots taken); the Run attaches to it when it opens, and
 * from then on the coordination tells the run of every stop it observes through the
 * run's one entry, `stop(reason)`:
 *
 *   the lease keeper: lock taken or expired   → { kind: 'lock_lost' }
 *   a renewal, the stop watcher, the check    → { kind: 'stop_requested', value }
 *     before an action: the owner's stop key
 *
 * What renewals write to the run record comes from the run's snapshot (run-snapshot.ts),
 * which the run keeps up to date; nothing here reads the run itself.
 */
import type { CoordinationBackend, LeaseRefresh } from './backend';
import type { HeldLock, Lease, LeaseHooks } from './lease';
import type { LeaseKeeper } from './lease-keeper';
import type { CoordinationMetrics } from './metrics';
import type { RunSnapshot } from './run-snapshot';
import type { StopListener, StopWatcher } from './stop-watcher';

export interface CoordinationDeps {
  backend: CoordinationBackend;
  /** The process's lease keeper renews the lock and releases it (batched with other runs'). */
  leases: LeaseKeeper;
  stopWatcher: StopWatcher;
  metrics: CoordinationMetrics;
  leaseTtlMs: number;
}

/** The stops the coordination makes (part of the run's StopReason, run/stop-reasons.ts). */
export type CoordinationStop = { readonly kind: 'lock_lost'; readonly why: 'taken' | 'expired' } | { readonly kind: 'stop_requested'; readonly value: string };

/** The run the coordination stops. */
export interface StoppableRun {
  stop(reason: CoordinationStop): unknown;
}

/** The process's detached-run slots (the run registry), given back at release. */
export interface ProcessSlots {
  releaseDetached(): void;
}

export class RunCoordination implements LeaseHooks, StopListener {
  private lease: Lease | undefined;
  private run: StoppableRun | undefined;
  private recordWrite: Promise<void> | undefined;
  private releasing: Promise<void> | undefined;
  /** A run without the lock wrote a record while parked (released with the run, or at its re-attach). */
  private parkedRecord = false;
  /**
   * The snapshot version the record in Redis is known to hold (undefined: not known, after
   * a failed write or renewal); a renewal at that version sends no fields. Set from
   * answers, so it can only lag what Redis holds (then a renewal writes fields that were
   * there already), never run ahead of it.
   */
  private storedVersion: number | undefined;
  /** The version the renewal in flight carries. */
  private renewingVersion: number | undefined;

  constructor(
    private readonly deps: CoordinationDeps,
    readonly workflowId: string,
    /** What the run record says; the run keeps it current. */
    readonly snapshot: RunSnapshot,
    /** Absent: a blocking run without LockConcurrentFlow, or one going on without Redis. */
    private readonly lock: HeldLock | undefined,
    /** Set when a detached slot of this process was taken (blocking runs take none). */
    private readonly slots: ProcessSlots | undefined,
  ) {}

  /** Whether the run holds the workflow's lock (and so is renewed, watched and checked for stops). */
  get locked(): boolean {
    return this.lock !== undefined;
  }

  /** How long the lock is sure to live from now; 0 without one. */
  get leaseRemainingMs(): number {
    return this.lease ? this.lease.remainingMs : 0;
  }

  /**
   * The run that now holds what admission took: its lock is renewed from now on (every
   * TTL/3, batched with every other lease) and its stop key watched. Once.
   */
  attach(run: StoppableRun): void {
    if (this.run || this.releasing) return;
    this.run = run;
    if (!this.lock) return;
    this.lease = this.deps.leases.hold(this.workflowId, this.lock, this);
    this.deps.stopWatcher.watch(this.workflowId, this);
  }

  /**
   * The stop check before an action is served: one read of the stop key (batched with
   * other runs' reads of the same turn); a key found set stops the run before the action
   * is served. Never rejects: a read that fails lets the action through.
   */
  checkStop(): Promise<void> {
    return this.deps.backend.readStop(this.workflowId).then(
      (value) => {
        if (value !== null) this.stopSignalSeen(value);
      },
      () => undefined,
    );
  }

  /** The run acted on the owner's stop key: the run acting on it deletes it. */
  stopKeyActedOn(): void {
    this.deps.backend.clearStop(this.workflowId).catch(() => undefined);
  }

  /**
   * Writes the run record (a locked run only), awaited by release so the record is never
   * written after it. Resolves once stored; a failure goes to `onError`, never thrown.
   */
  writeRecord(onError: (err: unknown) => void): Promise<void> {
    if (!this.lock) return Promise.resolve();
    const version = this.snapshot.version;
    this.recordWrite = this.deps.backend.writeRunRecord(this.workflowId, this.snapshot.fields(), this.deps.leaseTtlMs).then(
      () => void (this.storedVersion = version),
      (err: unknown) => {
        this.storedVersion = undefined;
        onError(err);
      },
    );
    return this.recordWrite;
  }

  /**
   * A WebSocket run was parked (for `windowMs`) or re-attached (docs/spec.md §12): the
   * record says so at once, naming this replica, for a reconnect landing on another one.
   * A run under the lock rewrites its record; one without the lock keeps a record only
   * while parked (for the window and a lease more), deleted when it re-attaches or ends.
   */
  noteParked(parked: boolean, windowMs: number, onError: (err: unknown) => void): void {
    if (this.lock) {
      void this.writeRecord(onError);
      return;
    }
    const { backend, leaseTtlMs } = this.deps;
    if (parked) {
      this.parkedRecord = true;
      this.recordWrite = backend.writeRunRecord(this.workflowId, this.snapshot.fields(), windowMs + leaseTtlMs).catch(onError);
    } else if (this.parkedRecord) {
      this.parkedRecord = false;
      void this.dropParkedRecord();
    }
  }

  /** The record of a run without the lock, deleted (compare-and-delete on the run id: no lock is touched). */
  private async dropParkedRecord(): Promise<void> {
    await this.recordWrite;
    await this.deps.backend.release(this.workflowId, '', this.snapshot.runId).catch(() => undefined);
  }

  /**
   * Gives everything back: the stop watch, the lock (compare-and-delete, with the run
   * record when it is this run's and the stop key when the lock was ours), the actor
   * slot, the process slot. Idempotent and never rejects; what Redis could not take back
   * expires with the lease.
   */
  release(): Promise<void> {
    this.releasing ??= (async () => {
      const lock = this.lock;
      try {
        if (this.lease) this.deps.stopWatcher.unwatch(this.workflowId, this);
        await this.recordWrite;
        if (lock) {
          const runId = this.snapshot.runId;
          const released = this.lease
            ? await this.lease.release(runId)
            : await this.deps.leases.releaseLock({ workflowId: this.workflowId, token: lock.token, runId, ...(lock.actor ? { actor: lock.actor } : {}) });
          this.deps.metrics.lock('release', released ? 'ok' : 'error');
        } else if (this.parkedRecord) {
          this.parkedRecord = false;
          await this.dropParkedRecord();
        }
      } finally {
        this.slots?.releaseDetached();
      }
    })();
    return this.releasing;
  }

  /** LeaseHooks: the lock is gone (taken over, or not renewed in time). */
  onLost(why: 'taken' | 'expired'): void {
    this.deps.metrics.lock('renew', 'lost');
    this.run?.stop({ kind: 'lock_lost', why });
  }

  /**
   * LeaseHooks: the store had lost the lock with its data, and the renewal re-created it
   * (store-fence.lua): the run goes on. The run record went with the data: written again,
   * so a reconnect on another replica finds where the run is.
   */
  onReasserted(): void {
    this.deps.metrics.lock('renew', 'reasserted');
    void this.writeRecord(() => undefined);
  }

  /** LeaseHooks: a renewal found the owner's stop key. */
  onStop(value: string): void {
    this.stopSignalSeen(value);
  }

  /** LeaseHooks: a renewal's outcome, counted. */
  onRenew(result: 'ok' | 'error'): void {
    this.deps.metrics.lock('renew', result);
    this.storedVersion = result === 'ok' ? this.renewingVersion : undefined;
  }

  /** LeaseHooks: what the renewal refreshes in the run record — nothing but its TTL when the record is as stored. */
  refresh(): LeaseRefresh {
    const { runId, version } = this.snapshot;
    this.renewingVersion = version;
    return version === this.storedVersion ? { runId } : { runId, record: this.snapshot.refresh() };
  }

  /** StopListener (and the checks above): the owner's stop key is set. */
  stopSignalSeen(value: string): void {
    this.run?.stop({ kind: 'stop_requested', value });
  }
}
