/**
 * A request's abort signal: aborted when its parent aborts or after `timeoutMs`,
 * whichever comes first. `dispose()` (called when the request is done, read body
 * included) clears the timer and detaches from the parent.
 *
 * Why not `AbortSignal.any([parent, AbortSignal.timeout(ms)])`: on Node 20 the timeout's
 * timer cannot be cleared, so every finished request still fires it later (building a
 * DOMException each time), and every combined signal stays registered on the long-lived
 * parent (a run's signal, the gateway's callback budget) until it is collected — a run
 * that relayed thousands of requests then aborts thousands of dead signals at its end.
 * In the relay benchmark the two cost about a tenth of the gateway's CPU.
 */

export interface Deadline {
  readonly signal: AbortSignal;
  /** True when the timeout, not the parent, aborted the signal. */
  readonly timedOut: boolean;
  /** Clears the timer and forgets the parent. Idempotent. */
  dispose(): void;
}

/**
 * The requests following each parent signal. One 'abort' listener per parent, whatever
 * the number of requests: EventTarget checks a new listener against every listener
 * already there, so a listener per request on a shared parent (thousands of segment-end
 * callbacks in flight during a drain) would make each addition cost the whole list.
 */
const followers = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls `onAbort` once when `parent` aborts; the returned function forgets it. Costs one
 * Set entry, not a listener, per follower (see above). `parent` must not be aborted yet.
 */
export function follow(parent: AbortSignal, onAbort: () => void): () => void {
  let set = followers.get(parent);
  if (!set) {
    const created = new Set<() => void>();
    followers.set(parent, created);
    parent.addEventListener(
      'abort',
      () => {
        for (const abort of [...created]) abort();
        created.clear();
      },
      { once: true },
    );
    set = created;
  }
  set.add(onAbort);
  const members = set;
  return () => members.delete(onAbort);
}

export function deadline(parent: AbortSignal | undefined, timeoutMs: number | undefined): Deadline {
  const controller = new AbortController();
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  let unfollow: (() => void) | undefined;
  if (parent?.aborted) controller.abort(parent.reason);
  else if (parent) unfollow = follow(parent, () => controller.abort(parent.reason));
  if (timeoutMs !== undefined && !controller.signal.aborted) {
    timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
    }, timeoutMs);
    // Like AbortSignal.timeout: a pending deadline alone does not keep the process alive.
    timer.unref();
  }
  return {
    signal: controller.signal,
    get timedOut() {
      return timedOut;
    },
    dispose() {
      clearTimeout(timer);
      unfollow?.();
    },
  };
}
