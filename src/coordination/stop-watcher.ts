/**
 * Watches the stop keys of this process's runs (SPEC §5): near-instantly through
 * pub/sub notices, and on LONGRUN_STOP_POLL_MS with one batched read for all runs (so
 * ten thousand runs cost one MGET per poll, not ten thousand timers). The poll timer runs
 * only while something is watched.
 */
import type { CoordinationBackend } from './backend';

type StopHandler = (value: string) => void;

const POLL_BATCH = 1_000;

export class StopWatcher {
  private readonly watched = new Map<string, Set<StopHandler>>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(
    private readonly backend: CoordinationBackend,
    private readonly pollMs: number,
  ) {
    backend.onStopNotice((workflowId) => void this.check(workflowId));
  }

  /** Calls onStop with the key's value whenever it is seen set; returns the unwatch function. */
  watch(workflowId: string, onStop: StopHandler): () => void {
    let handlers = this.watched.get(workflowId);
    if (!handlers) {
      handlers = new Set();
      this.watched.set(workflowId, handlers);
    }
    handlers.add(onStop);
    this.timer ??= setInterval(() => void this.poll(), this.pollMs);
    return () => {
      handlers.delete(onStop);
      if (handlers.size === 0) this.watched.delete(workflowId);
      if (this.watched.size === 0) this.stopTimer();
    };
  }

  private stopTimer(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private deliver(workflowId: string, value: string | null): void {
    if (value === null) return;
    for (const handler of this.watched.get(workflowId) ?? []) handler(value);
  }

  private async check(workflowId: string): Promise<void> {
    if (!this.watched.has(workflowId)) return;
    const value = await this.backend.readStop(workflowId).catch(() => null);
    this.deliver(workflowId, value);
  }

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const ids = [...this.watched.keys()];
      for (let i = 0; i < ids.length; i += POLL_BATCH) {
        const batch = ids.slice(i, i + POLL_BATCH);
        const values = await this.backend.readStops(batch).catch(() => batch.map(() => null));
        batch.forEach((id, j) => this.deliver(id, values[j] ?? null));
      }
    } finally {
      this.polling = false;
    }
  }

  close(): void {
    this.watched.clear();
    this.stopTimer();
  }
}
