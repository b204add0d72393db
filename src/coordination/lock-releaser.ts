/**
 * Lock releases, batched: every release asked for in one turn of the event loop goes to
 * the store in one `releaseMany` (one script call per primary and per BATCH_LEASES locks),
 * and each caller still learns its own lock's outcome. Runs that end together — a drain
 * stopping thousands at once — cost Redis a handful of commands instead of one each.
 */
import { CoordinationError, type CoordinationBackend, type LockRelease, type ReleaseOutcome } from './backend';

/** Told of every batch sent (metrics): how many locks, how long it took, whether any failed. */
export type BatchObserver = (op: 'renew' | 'release', locks: number, seconds: number, result: 'ok' | 'error') => void;

interface Pending {
  release: LockRelease;
  resolve(released: boolean): void;
}

export class LockReleaser {
  private queue: Pending[] = [];
  private scheduled = false;

  constructor(
    private readonly backend: Pick<CoordinationBackend, 'releaseMany'>,
    private readonly observe?: BatchObserver,
  ) {}

  /**
   * Compare-and-deletes the lock (with its run record, stop key and actor slot) in the next
   * batch. Never rejects: resolves false when the store failed (the keys then expire
   * within one TTL).
   */
  release(release: LockRelease): Promise<boolean> {
    return new Promise((resolve) => {
      this.queue.push({ release, resolve });
      if (this.scheduled) return;
      this.scheduled = true;
      // After the I/O callbacks of this turn: stream ends that arrive together share a batch.
      setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const batch = this.queue;
    this.queue = [];
    this.scheduled = false;
    const started = performance.now();
    let outcomes: ReleaseOutcome[];
    try {
      outcomes = await this.backend.releaseMany(batch.map((p) => p.release));
    } catch (err) {
      const error = err instanceof CoordinationError ? err : new CoordinationError('release failed', { cause: err });
      outcomes = batch.map(() => error);
    }
    this.observe?.('release', batch.length, (performance.now() - started) / 1_000, outcomes.some((o) => o !== null) ? 'error' : 'ok');
    batch.forEach((pending, i) => pending.resolve(outcomes[i] === null));
  }
}
