/**
 * The client's retry policy. A failure the gateway marks retryable (docs/spec.md §3: 503 DRAINING,
 * LOCK_UNAVAILABLE, CAPACITY_EXHAUSTED; 502 OWNER_UNAVAILABLE, PREAUTH_INVALID,
 * WORKFLOW_SERVICE_UNAVAILABLE; 429 ACTOR_LIMIT; 500 INTERNAL), the owner's own 429 passed
 * through (PREAUTH_DENIED: Rails rate-limits the execute preauth, with Retry-After) and a
 * network failure are tried again, on the next gateway endpoint when there are several, until one answers,
 * `maxAttempts` is spent, or the next try would start past `deadlineMs`.
 *
 * When an answer carries Retry-After, that endpoint is not tried again before it (plus up
 * to `jitter` of it, so a fleet of dispatchers told "1 s" does not come back in step);
 * otherwise backoff doubles from `baseDelayMs` to `maxDelayMs` with equal jitter. A
 * Retry-After that ends past the deadline ends the retries at once: the caller (a job
 * queue, say) reschedules. 409 WORKFLOW_LOCKED is never retried (it is a result, not a
 * failure: the run in flight is the turn).
 *
 * A start the gateway's store fence refused (503 LOCK_UNAVAILABLE with `fence`: its Redis is
 * new, or lost its data, and grants no lock for up to one lease TTL) is waited out by its
 * Retry-After up to `storeFenceWaitMs` instead of `deadlineMs`: the fence ends by itself,
 * and a caller of longrun's own client should never see it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { abortReason, LongrunError } from './errors';

export interface RetryOptions {
  /** Attempts in all, the first included (default 10; 1 = no retry). */
  maxAttempts: number;
  /** No attempt starts later than this after the first (default 30 000 ms). */
  deadlineMs: number;
  /** First backoff without Retry-After (default 200 ms); doubles per failure. */
  baseDelayMs: number;
  /** Backoff ceiling (default 5 000 ms). */
  maxDelayMs: number;
  /** Extra wait after a Retry-After, as a fraction of it, drawn at random (default 0.2). */
  jitter: number;
  /** Which failures to retry (default: those marked retryable). */
  retryOn: (error: LongrunError) => boolean;
  /**
   * How long a start refused by the store fence is waited out, from the first attempt (default
   * 75 000 ms: the gateway's default lease TTL, 60 s, the longest a fence lasts, plus the
   * Retry-After's jitter). Past it the refusal is thrown. Never shorter than `deadlineMs`.
   */
  storeFenceWaitMs: number;
}

export const defaultRetryOptions: RetryOptions = {
  maxAttempts: 10,
  deadlineMs: 30_000,
  baseDelayMs: 200,
  maxDelayMs: 5_000,
  jitter: 0.2,
  retryOn: (error) => error.retryable,
  storeFenceWaitMs: 75_000,
};

/** Time as the retry loop sees it; tests pass one that records the waits instead of sleeping. */
export interface RetryClock {
  now(): number;
  /** Resolves after ms; rejects with the signal's reason when it aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** In [0, 1). */
  random(): number;
}

export const systemClock: RetryClock = {
  now: () => Date.now(),
  sleep: (ms, signal) => sleep(ms, undefined, signal ? { signal } : undefined),
  random: () => Math.random(),
};

/** How long to leave an endpoint alone after `failures` failures in a row, the last being `error`. */
export function retryDelayMs(error: LongrunError, failures: number, options: RetryOptions, random: () => number): number {
  if (error.retryAfterS !== undefined) return error.retryAfterS * 1_000 * (1 + options.jitter * random());
  const ceiling = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** Math.max(0, failures - 1));
  return ceiling / 2 + (random() * ceiling) / 2;
}

export interface Attempted<T> {
  value: T;
  attempts: number;
  endpoint: string;
}

/**
 * Calls `attempt` on `endpoints` (starting at `first`) until it resolves or the policy
 * gives up; throws the last LongrunError with `attempts` set, or the signal's reason.
 */
export async function withRetries<T>(
  endpoints: readonly string[],
  first: number,
  attempt: (endpoint: string) => Promise<T>,
  options: RetryOptions,
  clock: RetryClock,
  signal?: AbortSignal,
): Promise<Attempted<T>> {
  const started = clock.now();
  const notBefore = new Map<string, number>();
  let index = first % endpoints.length;
  for (let attempts = 1; ; attempts++) {
    if (signal?.aborted) throw abortReason(signal);
    const endpoint = endpoints[index] as string;
    try {
      return { value: await attempt(endpoint), attempts, endpoint };
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      if (!(err instanceof LongrunError)) throw err;
      err.attempts = attempts;
      if (attempts >= options.maxAttempts || !options.retryOn(err)) throw err;
      const now = clock.now();
      notBefore.set(endpoint, now + retryDelayMs(err, attempts, options, () => clock.random()));
      index = soonest(endpoints, index, notBefore);
      const wait = Math.max(0, (notBefore.get(endpoints[index] as string) ?? 0) - now);
      const bound = err.fence === undefined ? options.deadlineMs : Math.max(options.deadlineMs, options.storeFenceWaitMs);
      if (now + wait - started > bound) throw err;
      if (wait > 0) await clock.sleep(wait, signal);
    }
  }
}

/** The endpoint free soonest, looking from the one after `current` (so ties rotate). */
function soonest(endpoints: readonly string[], current: number, notBefore: Map<string, number>): number {
  let best = current;
  let bestAt = Infinity;
  for (let step = 1; step <= endpoints.length; step++) {
    const i = (current + step) % endpoints.length;
    const at = notBefore.get(endpoints[i] as string) ?? 0;
    if (at < bestAt) {
      best = i;
      bestAt = at;
    }
  }
  return best;
}
