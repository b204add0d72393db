/**
 * The store fence of each primary (store-fence.lua) as this replica last heard it from a
 * lock or lease script: how long it has left and why, for the gauge operators watch
 * (`longrun_redis_store_fence_seconds`) and the log line that says what it is, once per
 * fence. A fence is the store's, not this replica's: every replica that tries a lock on
 * it hears the same end (by the server's clock), so the time left is kept as a local
 * deadline and read off at each scrape.
 */
import type { StoreFence } from '../core/vocabulary';

/** One primary's fence as of now. */
export interface StoreFenceView {
  /** The primary's address (`host:port`), or `unknown` while it cannot be told. */
  primary: string;
  /** Milliseconds until new locks are granted again (0: granted now). */
  remainingMs: number;
  /** Why it is up; undefined once it is over. */
  why: StoreFence | undefined;
}

/** Told of each fence once, when first heard (and again when its reason or end changes). */
export type FenceListener = (primary: string, remainingMs: number, why: StoreFence) => void;

/**
 * A fence heard again ends within a round trip of where it was first heard to (the
 * server's clock against this one's): this much later is the same fence.
 */
const SAME_FENCE_SLACK_MS = 1_000;

export class StoreFences {
  private readonly byPrimary = new Map<string, { untilMs: number; why: StoreFence | undefined }>();

  /**
   * @param single one primary at a time (one server, or Sentinel's): a primary heard of
   *   replaces the ones before it, so a failover leaves no series behind.
   */
  constructor(
    private readonly single: boolean,
    private readonly onFence: FenceListener,
  ) {}

  /** What a script answered on `primary`: the fence has `remainingMs` left (0: none), for `why`. */
  heard(primary: string, remainingMs: number, why: StoreFence | undefined, now = Date.now()): void {
    const before = this.byPrimary.get(primary);
    if (this.single && !before) this.byPrimary.clear();
    if (remainingMs <= 0 || why === undefined) {
      this.byPrimary.set(primary, { untilMs: 0, why: undefined });
      return;
    }
    const untilMs = now + remainingMs;
    const same = before !== undefined && before.why === why && before.untilMs > now && untilMs <= before.untilMs + SAME_FENCE_SLACK_MS;
    this.byPrimary.set(primary, { untilMs: same ? before.untilMs : untilMs, why });
    if (!same) this.onFence(primary, remainingMs, why);
  }

  /** Every primary heard of (on a Cluster, only those in `primaries` when given: others are dropped). */
  view(primaries?: readonly string[], now = Date.now()): StoreFenceView[] {
    if (primaries) for (const primary of this.byPrimary.keys()) if (!primaries.includes(primary)) this.byPrimary.delete(primary);
    return [...this.byPrimary].map(([primary, { untilMs, why }]) => {
      const remainingMs = Math.max(0, untilMs - now);
      return { primary, remainingMs, why: remainingMs > 0 ? why : undefined };
    });
  }
}
