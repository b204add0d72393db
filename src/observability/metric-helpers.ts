/**
 * What every part's metrics (`<part>/metrics.ts`) are made with: label values from finite
 * vocabularies — a value off its list is recorded as `other`, never a workflow id, an actor
 * or a path — the shared buckets, and the tally the hot counters are counted in.
 */
import type { Counter, Registry } from 'prom-client';

/** `value` when `vocabulary` lists it, else `other` (for values that come from outside: the wire, a peer). */
export function oneOf(value: string, vocabulary: readonly string[]): string {
  return vocabulary.includes(value) ? value : 'other';
}

/** Milliseconds to the 10 s defaults (accept wait, stop-ack timeout) and a little over. */
export const MS_TO_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15];

/**
 * Increments of one counter on the action path (one or two per relayed action), tallied
 * in plain numbers by label values and handed to prom-client when the registry is read
 * (the counter's `collect`). prom-client's inc() hashes and validates the labels on
 * every call; a scrape every few seconds pays that once per label set instead.
 */
export class Tally {
  private readonly pending = new Map<string, { labels: Record<string, string>; count: number }>();

  /** Adds one for `labels`; `key` names the label values (the same key, the same labels). */
  add(key: string, labels: () => Record<string, string>): void {
    const entry = this.pending.get(key);
    if (entry) entry.count += 1;
    else this.pending.set(key, { labels: labels(), count: 1 });
  }

  /** Moves the tallies into `counter` (from its collect(), before it is read). */
  flushInto(counter: Counter): void {
    for (const entry of this.pending.values()) {
      if (entry.count === 0) continue;
      counter.inc(entry.labels, entry.count);
      entry.count = 0;
    }
  }
}

/**
 * A part's metrics (`<part>/metrics.ts`): each metric is a field registered on `this.registry`,
 * the process's one registry (observability/metrics.ts) given to the constructor — a
 * subclass's fields are made once this constructor has run.
 */
export abstract class PartMetrics {
  constructor(protected readonly registry: Registry) {}
}
