/**
 * Requests asked for in one turn of the event loop, sent as one: each caller adds its
 * item and gets its own answer, and the items that arrive together — actions or stream
 * ends of many runs in the same I/O callbacks — share one command to the store. The
 * batch is sent after this turn's I/O callbacks (setImmediate). With `oneInFlight`, a
 * batch waits while the one before it is out, so items added meanwhile go next, together,
 * and no item is ever folded into a batch already sent.
 */

interface Waiter<R> {
  resolve(value: R): void;
  reject(err: unknown): void;
}

export class TurnBatch<T, R> {
  private items: T[] = [];
  private waiters: Array<Waiter<R>> = [];
  private scheduled = false;
  private inFlight = false;

  constructor(
    /** Sends the items; answers per item, in order. A rejection rejects every caller of the batch. */
    private readonly send: (items: T[]) => Promise<R[]>,
    private readonly options: { oneInFlight?: boolean } = {},
  ) {}

  /** The item's answer, from the batch it goes out in. */
  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.items.push(item);
      this.waiters.push({ resolve, reject });
      if (this.scheduled || this.inFlight) return;
      this.scheduled = true;
      setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    this.scheduled = false;
    const { items, waiters } = this;
    if (items.length === 0) return;
    this.items = [];
    this.waiters = [];
    if (this.options.oneInFlight) this.inFlight = true;
    const done = (): void => {
      if (!this.options.oneInFlight) return;
      this.inFlight = false;
      // Items added meanwhile go now, together.
      if (this.items.length > 0 && !this.scheduled) this.flush();
    };
    let sent: Promise<R[]>;
    try {
      sent = this.send(items);
    } catch (err) {
      sent = Promise.reject(err);
    }
    sent.then(
      (answers) => {
        done();
        waiters.forEach((w, i) => w.resolve(answers[i] as R));
      },
      (err: unknown) => {
        done();
        waiters.forEach((w) => w.reject(err));
      },
    );
  }
}
