/**
 * Stop-key reads before actions (SPEC §5), batched: the reads asked for while one event-loop
 * callback runs — the workflow service's actions of one HTTP/2 read, usually for several
 * runs — go to the store as one `readStops` (one MGET), instead of one command each. Every
 * read is still made after it was asked for and answered before the action is served, so
 * the guarantee is unchanged; only the per-command cost is shared.
 */
import type { CoordinationBackend } from './backend';

interface Waiter {
  resolve(value: string | null): void;
  reject(err: unknown): void;
}

export class StopReads {
  private ids: string[] = [];
  private waiters: Waiter[] = [];

  constructor(private readonly backend: Pick<CoordinationBackend, 'readStops'>) {}

  /** The stop key's value, or null; rejects as readStops does. */
  read(workflowId: string): Promise<string | null> {
    return new Promise((resolve, reject) => {
      // At the end of this callback (after its promise jobs): everything it asked for, together.
      if (this.ids.length === 0) process.nextTick(() => this.flush());
      this.ids.push(workflowId);
      this.waiters.push({ resolve, reject });
    });
  }

  private flush(): void {
    const { ids, waiters } = this;
    this.ids = [];
    this.waiters = [];
    this.backend.readStops(ids).then(
      (values) => waiters.forEach((w, i) => w.resolve(values[i] ?? null)),
      (err: unknown) => waiters.forEach((w) => w.reject(err)),
    );
  }
}
