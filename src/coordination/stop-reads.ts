/**
 * Stop-key reads before actions (SPEC §5), batched: the reads asked for in one turn of the
 * event loop — the workflow service's actions for many runs — go to the store as one read
 * of many keys (one MGET), and while that read is out, the next reads gather for the one
 * after it. Every read is still made after it was asked for and answered before its
 * action is served, so the guarantee is unchanged; only the per-command cost is shared.
 */

/** Reads many stop keys at once: per workflow id in order, its value or null. */
export type ReadStops = (workflowIds: string[]) => Promise<Array<string | null>>;

interface Waiter {
  resolve(value: string | null): void;
  reject(err: unknown): void;
}

export class StopReads {
  private ids: string[] = [];
  private waiters: Waiter[] = [];
  private scheduled = false;
  private inFlight = false;

  constructor(private readonly readStops: ReadStops) {}

  /** The stop key's value, or null; rejects as readStops does. */
  read(workflowId: string): Promise<string | null> {
    return new Promise((resolve, reject) => {
      this.ids.push(workflowId);
      this.waiters.push({ resolve, reject });
      if (this.scheduled || this.inFlight) return;
      this.scheduled = true;
      // After the I/O callbacks of this turn: actions that arrive together share a read.
      setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    this.scheduled = false;
    const { ids, waiters } = this;
    if (ids.length === 0) return;
    this.ids = [];
    this.waiters = [];
    this.inFlight = true;
    const done = (): void => {
      this.inFlight = false;
      // Reads asked for meanwhile go now, together.
      if (this.ids.length > 0 && !this.scheduled) this.flush();
    };
    let read: Promise<Array<string | null>>;
    try {
      read = this.readStops(ids);
    } catch (err) {
      read = Promise.reject(err);
    }
    read.then(
      (values) => {
        done();
        waiters.forEach((w, i) => w.resolve(values[i] ?? null));
      },
      (err: unknown) => {
        done();
        waiters.forEach((w) => w.reject(err));
      },
    );
  }
}
