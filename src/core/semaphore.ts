/**
 * A counting semaphore whose waiters honour an AbortSignal: at most `limit` holders at
 * once, the rest queued in arrival order. Waiters whose signal aborts leave the queue at
 * once (their acquire resolves false), so nothing waits past the budget that bounds it.
 *
 * One abort listener per signal with waiters, not one per waiter: a drain queues thousands
 * of callbacks on one budget signal, and EventTarget scans its whole listener list on
 * every add. The listener goes when the signal's last waiter does.
 */
interface Waiter {
  grant(granted: boolean): void;
  signal: AbortSignal | undefined;
}

interface Watch {
  waiters: number;
  onAbort(): void;
}

export class Semaphore {
  private held = 0;
  private waiters: Waiter[] = [];
  private readonly watched = new Map<AbortSignal, Watch>();

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
    if (signal) {
      let watch = this.watched.get(signal);
      if (!watch) {
        watch = { waiters: 0, onAbort: () => this.drop(signal) };
        this.watched.set(signal, watch);
        signal.addEventListener('abort', watch.onAbort, { once: true });
      }
      watch.waiters += 1;
    }
    return new Promise((grant) => this.waiters.push({ grant, signal }));
  }

  /** Gives a place back: the longest waiter gets it. */
  release(): void {
    const next = this.waiters.shift();
    if (!next) {
      this.held = Math.max(0, this.held - 1);
      return;
    }
    if (next.signal) this.unwatch(next.signal);
    next.grant(true);
  }

  private unwatch(signal: AbortSignal): void {
    const watch = this.watched.get(signal);
    if (!watch || --watch.waiters > 0) return;
    this.watched.delete(signal);
    signal.removeEventListener('abort', watch.onAbort);
  }

  private drop(signal: AbortSignal): void {
    this.watched.delete(signal);
    const dropped = this.waiters.filter((w) => w.signal === signal);
    this.waiters = this.waiters.filter((w) => w.signal !== signal);
    for (const waiter of dropped) waiter.grant(false);
  }
}
