/**
 * Late answers on given-up bridges (docs/spec.md §12). A client's answer to an action that
 * its replica sent through a bridge before it learnt the holder had given that bridge up
 * (a gap, the peer silent, a beat no longer listing it) still reaches the run: the run
 * takes each answer once (client-run.ts), so one the client gives again on a new
 * connection changes nothing, and one it does not give again is not lost.
 *
 * What is kept for that, per bridge given up: the replica it came from and the run's sink,
 * one small object per run that lets the run go when it ends (an answer then goes nowhere) —
 * nothing of the link, its queues or its connection. An entry goes `keepMs` after the bridge
 * was given up (no message of it can still be on its way: a sender gives a failed send up
 * after the peer's deadline), or at the first message after its run ended; at most
 * MAX_ENTRIES are kept, the oldest dropped first. An ended run is never held here (issue
 * [26]: holding whole given-up links kept every ended run they had served, 10 000 at most).
 */
import type { ClientEvent } from '../../workflow/contract';

/** What takes a late answer: the run's client side (client-run.ts). */
export interface LateTarget {
  fromClient(event: ClientEvent): boolean;
}

/** A run's sink for late answers: its client side while the run is in flight, nothing once it has ended. */
export class LateSink {
  constructor(private target: LateTarget | undefined) {}

  /** Whether the run has ended (or will never open): an answer has nowhere to go. */
  get isOver(): boolean {
    return this.target === undefined;
  }

  /** The run has ended: it is let go, whoever still holds this sink. */
  cut(): void {
    this.target = undefined;
  }

  fromClient(event: ClientEvent): boolean {
    return this.target?.fromClient(event) ?? false;
  }
}

interface Entry {
  peer: string;
  sink: LateSink;
  until: number;
}

/** Enough for every bridge of a busy replica given up at once; each entry is a few hundred bytes. */
const MAX_ENTRIES = 10_000;

export class LateAnswers {
  /** By bridge id, oldest first (Map order is insertion order; an id is never reused). */
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly keepMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Entries kept now. */
  get size(): number {
    return this.entries.size;
  }

  /** Bridge `id` (with `peer`) was given up while serving `sink`: its late answers go there for a while. */
  keep(id: string, peer: string, sink: LateSink): void {
    if (sink.isOver) return;
    this.entries.set(id, { peer, sink, until: this.now() + this.keepMs });
    if (this.entries.size > MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value as string);
  }

  /** Whether `id` is a given-up bridge still kept (a message of it is late, not unknown). */
  has(id: string): boolean {
    return this.entries.has(id);
  }

  /** A message of a given-up bridge from `from`: an answer to an action reaches the run; the rest is too late. */
  receive(id: string, from: string, event: ClientEvent | undefined): void {
    const entry = this.entries.get(id);
    if (!entry || entry.peer !== from) return;
    if (entry.sink.isOver) this.entries.delete(id);
    else if (event && 'actionResponse' in event) entry.sink.fromClient(event);
  }

  /** Drops what is past its time; true while anything is left (the caller's timer keeps running). */
  sweep(): boolean {
    const now = this.now();
    for (const [id, entry] of this.entries) {
      // Oldest first, all with the same keepMs: the first not yet due ends the sweep.
      if (entry.until > now) break;
      this.entries.delete(id);
    }
    // Those whose run ended let it go already; they leave at their time.
    return this.entries.size > 0;
  }
}
