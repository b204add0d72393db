/**
 * The run both accept modes start (accept.ts at a fixed rate, accept-burst.ts in bursts)
 * and what a side's executes (or bare starts) came to.
 */
import type { Step } from '../../sandbox/scenario';

/** The simulated model's time to the first action. */
export const FIRST_ACTION_MS = 20;
/** Each run then lives a second (so runs overlap as real ones do) and ends. */
export const RUN_LIFE_MS = 1_000;
export const steps: Step[] = [{ op: 'wait', ms: FIRST_ACTION_MS }, { op: 'checkpoint', text: 'first' }, { op: 'wait', ms: RUN_LIFE_MS }, { op: 'end' }];

/** Each accepted execute's overhead (ms past FIRST_ACTION_MS), and the others by why they failed (HTTP status, or `ended`). */
export interface Tally {
  overheads: number[];
  errors: Record<string, number>;
}

export function errorCount(tally: Tally): number {
  return Object.values(tally.errors).reduce((a, b) => a + b, 0);
}
