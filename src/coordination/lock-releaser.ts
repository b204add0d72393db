/**
 * Lock releases, batched (core/turn-batch.ts): every release asked for in one turn of the event loop goes to
 * the store in one `releaseMany` (one script call per primary and per BATCH_LEASES locks),
 * and each caller still learns its own lock's outcome. Runs that end together — a drain
 * stopping thousands at once — cost Redis a handful of commands instead of one each.
 */
import { TurnBatch } from '../core/turn-batch';
import { CoordinationError, type CoordinationBackend, type LockRelease, type ReleaseOutcome } from './backend';

/** Told of every batch sent (metrics): how many locks, how long it took, whether any failed. */
export type BatchObserver = (op: 'renew' | 'release', locks: number, seconds: number, result: 'ok' | 'error') => void;

export class LockReleaser {
  private readonly batch: TurnBatch<LockRelease, boolean>;

  constructor(backend: Pick<CoordinationBackend, 'releaseMany'>, observe?: BatchObserver) {
    this.batch = new TurnBatch(async (releases) => {
      const started = performance.now();
      let outcomes: ReleaseOutcome[];
      try {
        outcomes = await backend.releaseMany(releases);
      } catch (err) {
        const error = err instanceof CoordinationError ? err : new CoordinationError('release failed', { cause: err });
        outcomes = releases.map(() => error);
      }
      observe?.('release', releases.length, (performance.now() - started) / 1_000, outcomes.some((o) => o !== null) ? 'error' : 'ok');
      return outcomes.map((o) => o === null);
    });
  }

  /**
   * Compare-and-deletes the lock (with its run record, stop key and actor slot) in the next
   * batch. Never rejects: resolves false when the store failed (the keys then expire
   * within one TTL).
   */
  release(release: LockRelease): Promise<boolean> {
    return this.batch.add(release);
  }
}
