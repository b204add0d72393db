/**
 * Admission before a stream opens (SPEC §3b caps, §5 lock): the per-actor cap and the
 * workflow's lock. Detached runs always need the lock (store failing → 503
 * LOCK_UNAVAILABLE, never run without it); blocking runs take it when the owner sets
 * LockConcurrentFlow and run without it when the store fails (Workhorse parity), logged
 * and counted. Taking the lock clears a stale stop key (it addressed no run in flight).
 */
import { randomBytes } from 'node:crypto';
import { GatewayError } from '../errors';
import type { Logger } from '../log';
import type { Metrics } from '../metrics';
import { CoordinationError, type CoordinationBackend } from '../coordination/backend';

export interface HeldLock {
  token: string;
  acquiredAt: number;
  /** Set when an actor slot was taken with the token. */
  actorId?: string;
}

export interface AdmissionDeps {
  backend: CoordinationBackend;
  metrics: Metrics;
  logger: Logger;
  leaseTtlMs: number;
  maxRunsPerActor: number;
}

function unavailable(err: unknown): GatewayError {
  return new GatewayError('LOCK_UNAVAILABLE', 'the workflow lock store is unavailable; retry shortly', { cause: err, retryAfterS: 2 });
}

/**
 * Takes the actor slot (detached, when capped) and the lock.
 * `required` (detached): any store failure is LOCK_UNAVAILABLE.
 * `best_effort` (blocking): a store failure returns undefined and the run goes on unlocked.
 * Throws WORKFLOW_LOCKED when another run holds the lock, ACTOR_LIMIT over the actor cap.
 */
export async function admit(
  workflowId: string,
  mode: 'required' | 'best_effort',
  actorId: string | undefined,
  deps: AdmissionDeps,
  requestId: string,
): Promise<HeldLock | undefined> {
  const token = randomBytes(16).toString('hex');
  const acquiredAt = Date.now();
  const capped = mode === 'required' && actorId !== undefined && deps.maxRunsPerActor > 0;
  try {
    if (capped && !(await deps.backend.acquireActorSlot(actorId, token, deps.maxRunsPerActor, deps.leaseTtlMs))) {
      deps.metrics.capRejections.inc({ cap: 'actor' });
      throw new GatewayError('ACTOR_LIMIT', 'this actor has reached its limit of runs in flight', { retryAfterS: 30 });
    }
    let taken: boolean;
    try {
      taken = await deps.backend.acquire(workflowId, token, deps.leaseTtlMs);
    } catch (err) {
      deps.metrics.lock('acquire', 'error');
      throw err;
    }
    if (!taken) {
      deps.metrics.lock('acquire', 'taken');
      if (capped) await deps.backend.releaseActorSlot(actorId, token).catch(() => undefined);
      throw new GatewayError('WORKFLOW_LOCKED', 'another run holds this workflow', { retryAfterS: 5 });
    }
    deps.metrics.lock('acquire', 'ok');
    return { token, acquiredAt, ...(capped ? { actorId } : {}) };
  } catch (err) {
    if (!(err instanceof CoordinationError)) throw err;
    if (capped) await deps.backend.releaseActorSlot(actorId, token).catch(() => undefined);
    if (mode === 'required') throw unavailable(err);
    deps.metrics.unlockedRuns.inc();
    deps.logger.warn({ err, workflow_id: workflowId, request_id: requestId }, 'lock store unavailable: blocking run continues without the lock');
    return undefined;
  }
}
