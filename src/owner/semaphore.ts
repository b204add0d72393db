/**
 * A counting semaphore whose waiters honour an AbortSignal: at most `limit` holders at
 * once, the rest queued in arrival order. Waiters whose signal aborts leave the queue at
 * once (their acquire resolves false), so nothing waits past the budget that bounds it.
 *
 * One abort listener per signal, not per waiter: a drain queues thousands of callbacks on
 * one budget signal, and EventTarget scans its whole listener list on every add.
 */
interface Waiter {
  grant(granted: boolean): void;
  signal: AbortSignal | undefined;
}

export class Semaphore {
  private held = 0;
  private waiters: Waiter[] = [];
  private readonly watched = new Set<AbortSignal>();

  constructor(readonly limit: number) {}

  /** Places held now. */
  get active(): number {
    return this.held;
  }

  /** Waiters queued behind them. */
  get waiting(): number {
    return this.waiters.length;
  }

  /**
   * Resolves true once a place is held (give it back with `release()`), or false — holding
   * nothing — when `signal` aborts first (or already has).
   */
  acquire(signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted) return Promise.resolve(false);
    if (this.held < this.limit) {
      this.held += 1;
      return Promise.resolve(true);
    }
    if (signal && !this.watched.has(signal)) {
      this.watched.add(signal);
      signal.addEventListener('abort', () => this.drop(signal), { once: true });
    }
    return new Promise((grant) => this.waiters.push({ grant, signal }));
  }

  /** Gives a place back: the longest waiter gets it. */
  release(): void {
    const next = this.waiters.shift();
    if (next) next.grant(true);
    else this.held = Math.max(0, this.held - 1);
  }

  private drop(signal: AbortSignal): void {
    this.watched.delete(signal);
    const dropped = this.waiters.filter((w) => w.signal === signal);
    if (dropped.length === 0) return;
    this.waiters = this.waiters.filter((w) => w.signal !== signal);
    for (const waiter of dropped) waiter.grant(false);
  }
}
