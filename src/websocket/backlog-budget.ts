/**
 * The process's budget for the backlogs of parked WebSocket runs
 * (LONGRUN_WS_BACKLOG_BUDGET_BYTES, docs/spec.md §12). Each parked run's backlog is bounded
 * on its own (LONGRUN_WS_BACKLOG_BYTES, 8 MiB); this bounds them together, so a pod's
 * memory limit covers its parked runs whatever the workflow service sends them: past the
 * budget, a parked run whose backlog grows is stopped as a full backlog is (client-run.ts).
 * The bytes held can pass the budget by at most one frame per parked run, the frame that
 * crossed it, until that run has ended.
 */
export class BacklogBudget {
  private used = 0;

  constructor(readonly limitBytes: number) {}

  /** Bytes of frames every parked run of the process keeps now. */
  get usedBytes(): number {
    return this.used;
  }

  /** A parked run kept `bytes` more; false when the process's backlogs are now past the budget. */
  take(bytes: number): boolean {
    this.used += bytes;
    return this.used <= this.limitBytes;
  }

  /** A parked run's backlog was replayed or dropped. */
  give(bytes: number): void {
    this.used = Math.max(0, this.used - bytes);
  }
}
