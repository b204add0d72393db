/**
 * Taking a workflow's lock before its stream opens (SPEC §5): detached runs always need
 * it (Redis failing → 503 LOCK_UNAVAILABLE, never run without it); blocking runs take it
 * when the owner sets LockConcurrentFlow and run without it when Redis fails (Workhorse
 * parity), logged and counted.
 */
import { randomBytes } from 'node:crypto';
import { GatewayError } from '../errors';
import type { Logger } from '../log';
import type { Metrics } from '../metrics';
import { LockBackendError, type LockBackend } from '../coordination/lock-backend';

export interface HeldLock {
  backend: LockBackend;
  token: string;
  acquiredAt: number;
}

export interface LockDeps {
  backend: LockBackend;
  metrics: Metrics;
  logger: Logger;
  leaseTtlMs: number;
}

/**
 * Takes the lock. `required` (detached): any backend failure is LOCK_UNAVAILABLE.
 * `best_effort` (blocking): a backend failure returns undefined and the run goes on unlocked.
 * Throws WORKFLOW_LOCKED when another run holds it.
 */
export async function takeLock(workflowId: string, mode: 'required' | 'best_effort', deps: LockDeps, requestId: string): Promise<HeldLock | undefined> {
  const token = randomBytes(16).toString('hex');
  const acquiredAt = Date.now();
  let taken: boolean;
  try {
    taken = await deps.backend.acquire(workflowId, token, deps.leaseTtlMs);
  } catch (err) {
    if (!(err instanceof LockBackendError)) throw err;
    deps.metrics.lock('acquire', 'error');
    if (mode === 'required') {
      throw new GatewayError('LOCK_UNAVAILABLE', 'the workflow lock store is unavailable; retry shortly', { cause: err, retryAfterS: 2 });
    }
    deps.metrics.unlockedRuns.inc();
    deps.logger.warn({ err, workflow_id: workflowId, request_id: requestId }, 'lock store unavailable: blocking run continues without the lock');
    return undefined;
  }
  if (!taken) {
    deps.metrics.lock('acquire', 'taken');
    throw new GatewayError('WORKFLOW_LOCKED', 'another run holds this workflow', { retryAfterS: 5 });
  }
  deps.metrics.lock('acquire', 'ok');
  return { backend: deps.backend, token, acquiredAt };
}
