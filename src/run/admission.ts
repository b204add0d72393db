/**
 * Admission before a stream opens (docs/spec.md §3b caps, §5 lock), in the order the spec fixes:
 * the process's detached slot, then the per-actor slot and the workflow's lock. Detached
 * runs always need the lock (store failing → 503 LOCK_UNAVAILABLE, never run without
 * it); blocking runs take it when the owner sets LockConcurrentFlow and run without it
 * when the store fails (Workhorse parity), logged and counted. A store that lost its data
 * moments ago, or is new, refuses every start, on every transport (503 LOCK_UNAVAILABLE
 * with the fence's Retry-After; 1013 on a WebSocket): a run then might run beside a live one.
 * Taking the lock clears a stale stop key (it addressed no run in flight).
 */
import { randomUUID } from 'node:crypto';
import { GatewayError } from '../core/errors';
import { correlation, type Logger } from '../core/log';
import { CoordinationError, LockStoreFenced } from '../coordination/backend';
import type { HeldLock } from '../coordination/lease';
import { RunCoordination, type CoordinationDeps } from '../coordination/run-coordination';
import { RunSnapshot } from '../coordination/run-snapshot';
import { transportLabels, type Transport } from '../core/vocabulary';
import type { RunMetrics } from './metrics';
import type { RunRegistry } from './registry';

export interface AdmissionDeps {
  /** What a run holds in Redis is made with these; lock operations are counted in its metrics. */
  coordination: CoordinationDeps;
  registry: RunRegistry;
  /** The caps' refusals. */
  metrics: RunMetrics;
  logger: Logger;
  replicaId: string;
  maxRunsPerActor: number;
}

export interface AdmissionRequest {
  workflowId: string;
  transport: Transport;
  /** The owner's LockConcurrentFlow (detached runs take the lock regardless). */
  lockConcurrentFlow: boolean;
  actorId: string | undefined;
  requestId: string;
}

function unavailable(err: unknown): GatewayError {
  return new GatewayError('LOCK_UNAVAILABLE', 'the workflow lock store is unavailable; retry shortly', { cause: err });
}

/**
 * The store fence is up: every start waits (never one unlocked: a live run may hold the
 * workflow). The message says why (new, or lost its data: never one for the other) and
 * when to come back, the same text a WebSocket start is closed 1013 with (at most 123
 * bytes: close-codes.ts) and @longrun/client reads (store-fence.ts there).
 */
export function fenced(err: LockStoreFenced, leaseTtlMs: number): GatewayError {
  const retryAfterS = Math.max(1, Math.ceil(err.retryAfterMs / 1_000));
  const message =
    err.why === 'new'
      ? `the workflow lock store is new (no longrun marker): fenced until it is ${Math.ceil(leaseTtlMs / 1_000)} s old, retry in ${retryAfterS} s`
      : `the workflow lock store lost its data (a restart, a failover or a flush): fenced, retry in ${retryAfterS} s`;
  return new GatewayError('LOCK_UNAVAILABLE', message, { cause: err, retryAfterS, fence: err.why });
}

/**
 * Takes what the run needs and returns it as the run's coordination (its id, lock and
 * slots). Throws CAPACITY_EXHAUSTED (process cap), ACTOR_LIMIT (actor cap),
 * WORKFLOW_LOCKED (another run holds the lock) or LOCK_UNAVAILABLE (detached, store
 * failing); nothing stays taken when it throws.
 */
export async function reserve(want: AdmissionRequest, deps: AdmissionDeps): Promise<RunCoordination> {
  const detached = want.transport === 'detached';
  const slot = detached && deps.registry.reserveDetached();
  if (detached && !slot) {
    deps.metrics.capRejection('process');
    throw new GatewayError('CAPACITY_EXHAUSTED', 'this instance holds its maximum of detached runs');
  }
  try {
    const lock = detached || want.lockConcurrentFlow ? await takeLock(want, detached ? 'required' : 'best_effort', deps) : undefined;
    const snapshot = new RunSnapshot(randomUUID(), deps.replicaId, transportLabels[want.transport]);
    return new RunCoordination(deps.coordination, want.workflowId, snapshot, lock, slot ? deps.registry : undefined);
  } catch (err) {
    if (slot) deps.registry.releaseDetached();
    throw err;
  }
}

/**
 * Takes the actor slot (detached, when capped) and the lock.
 * `required` (detached): any store failure is LOCK_UNAVAILABLE.
 * `best_effort` (blocking): a store failure returns undefined and the run goes on unlocked.
 */
async function takeLock(want: AdmissionRequest, mode: 'required' | 'best_effort', deps: AdmissionDeps): Promise<HeldLock | undefined> {
  const { workflowId, actorId } = want;
  const { backend, leaseTtlMs, metrics: lockMetrics } = deps.coordination;
  // 122 random bits; randomUUID draws from a cached pool, randomBytes calls into OpenSSL each time.
  const token = randomUUID();
  const acquiredAt = Date.now();
  const actor = mode === 'required' && actorId !== undefined && deps.maxRunsPerActor > 0 ? { actorId, member: token } : undefined;
  // Fire and forget: a stalled store must not delay the refusal; the command runs after
  // ours on the same connection, so it undoes a slot our timed-out command took late.
  const giveBackActor = (): void => {
    if (actor) backend.releaseActorSlot(actor.actorId, actor.member).catch(() => undefined);
  };
  try {
    if (actor && !(await backend.acquireActorSlot(actor.actorId, actor.member, deps.maxRunsPerActor, leaseTtlMs))) {
      deps.metrics.capRejection('actor');
      throw new GatewayError('ACTOR_LIMIT', 'this actor has reached its limit of runs in flight');
    }
    let taken: boolean;
    try {
      taken = await backend.acquire(workflowId, token, leaseTtlMs);
    } catch (err) {
      if (err instanceof LockStoreFenced) {
        lockMetrics.lock('acquire', 'fenced');
        giveBackActor();
        throw fenced(err, leaseTtlMs);
      }
      lockMetrics.lock('acquire', 'error');
      // We gave up on the command, but Redis may still run it (a stalled server answers
      // late): the workflow would then be locked for a whole lease by a run that does
      // not exist. Compare-and-delete our token after it, so the retry the 503 invites
      // can succeed. Best effort, fire and forget.
      backend.release(workflowId, token, '').catch(() => undefined);
      throw err;
    }
    if (!taken) {
      lockMetrics.lock('acquire', 'taken');
      giveBackActor();
      throw new GatewayError('WORKFLOW_LOCKED', 'another run holds this workflow');
    }
    lockMetrics.lock('acquire', 'ok');
    return { token, acquiredAt, ...(actor ? { actor } : {}) };
  } catch (err) {
    if (!(err instanceof CoordinationError)) throw err;
    giveBackActor();
    if (mode === 'required') throw unavailable(err);
    lockMetrics.unlockedRuns.inc();
    deps.logger.warn({ err, workflow_id: workflowId, ...correlation(want.requestId) }, 'lock store unavailable: blocking run continues without the lock');
    return undefined;
  }
}
