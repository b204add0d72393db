/**
 * Watches the stop keys of this process's runs (docs/spec.md §5): near-instantly through
 * pub/sub notices, and on LONGRUN_STOP_POLL_MS with one batched read for all runs (so
 * ten thousand runs cost one MGET per poll, not ten thousand timers). The poll timer runs
 * only while something is watched.
 */
import type { CoordinationBackend } from './backend';

/** Who is told of a stop key seen set: a run (one object, no closure per run). */
export interface StopListener {
  stopSignalSeen(value: string): void;
}

const POLL_BATCH = 1_000;

export class StopWatcher {
  /** Listeners by workflow: one run per workflow and process normally, so a small array. */
  private readonly watched = new Map<string, StopListener[]>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(
    private readonly backend: CoordinationBackend,
    private readonly pollMs: number,
  ) {
    backend.onStopNotice((workflowId) => void this.check(workflowId));
  }

  /** Tells `listener` the key's value whenever it is seen set, until unwatch(). */
  watch(workflowId: string, listener: StopListener): void {
    const listeners = this.watched.get(workflowId);
    if (listeners) listeners.push(listener);
    else this.watched.set(workflowId, [listener]);
    this.timer ??= setInterval(() => void this.poll(), this.pollMs);
  }

  /** Workflows watched now. */
  get size(): number {
    return this.watched.size;
  }

  unwatch(workflowId: string, listener: StopListener): void {
    const listeners = this.watched.get(workflowId);
    if (!listeners) return;
    const left = listeners.filter((l) => l !== listener);
    if (left.length > 0) this.watched.set(workflowId, left);
    else this.watched.delete(workflowId);
    if (this.watched.size === 0) this.stopTimer();
  }

  private stopTimer(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private deliver(workflowId: string, value: string | null): void {
    if (value === null) return;
    for (const listener of this.watched.get(workflowId) ?? []) listener.stopSignalSeen(value);
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
