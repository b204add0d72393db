/**
 * Stop-key reads before actions (docs/spec.md §5), batched (core/turn-batch.ts): the reads asked for in one turn of the
 * event loop — the workflow service's actions for many runs — go to the store as one read
 * of many keys (one MGET), and while that read is out, the next reads gather for the one
 * after it. Every read is still made after it was asked for and answered before its
 * action is served, so the guarantee is unchanged; only the per-command cost is shared.
 */

import { TurnBatch } from '../core/turn-batch';

/** Reads many stop keys at once: per workflow id in order, its value or null. */
export type ReadStops = (workflowIds: string[]) => Promise<Array<string | null>>;

export class StopReads {
  private readonly batch: TurnBatch<string, string | null>;

  constructor(readStops: ReadStops) {
    this.batch = new TurnBatch((ids) => readStops(ids).then((values) => ids.map((_, i) => values[i] ?? null)), { oneInFlight: true });
  }

  /** The stop key's value, or null; rejects as readStops does. */
  read(workflowId: string): Promise<string | null> {
    return this.batch.add(workflowId);
  }
}
