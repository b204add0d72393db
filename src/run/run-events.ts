/**
 * What a run tells those who follow its workflow (docs/spec.md §14), through one narrow
 * interface. A run holds a RunEvents only while its workflow is followed — the follow
 * (src/follow/) gives it one when a follower appears, at the run's start or later, and takes
 * it back when the last one has gone — so a run nobody follows pays one undefined check
 * per action, and nothing else: no allocation, no I/O.
 */
import type { InFlightEntry } from '@longrun/client';
import type { SegmentEndReason, Transport } from '../core/vocabulary';
import type { Action } from '../workflow/contract';

/** How a run's segment ended, in the segment-end callback's words (docs/spec.md §6). */
export interface RunEnded {
  reason: SegmentEndReason;
  /** Actions unanswered when it ended (outcome unknown). */
  inFlight: InFlightEntry[];
  /** The stop and an OK end crossed (end-decision.ts). */
  endedWhileStopping: boolean;
}

export interface RunEvents {
  /** An Action the service sent: a checkpoint, or an action the gateway serves, passes on or refuses. Never throws. */
  action(action: Action): void;
  /** A WebSocket run's connection was lost at `at`: it waits, parked, for its client (docs/spec.md §12). */
  parked(at: number): void;
  /** A client re-attached to the parked run, through a bridge from `socketReplica` when it is not this replica. */
  attached(socketReplica: string | undefined): void;
  /**
   * The segment ended. Resolves once the end is recorded where every replica's followers
   * read it, or could not be (bounded, never rejects): the run gives its lock back only
   * then, so a next run of the workflow is always reported after this end.
   */
  ended(end: RunEnded): Promise<void>;
}

/** A run as a follow sees it: what its `run` event says, and where its reporter plugs in. */
export interface FollowableRun {
  readonly id: string;
  readonly workflowId: string;
  readonly transport: Transport;
  /** Epoch milliseconds. */
  readonly startedAt: number;
  /** starting, running, parked, stopping or ended, as /runs says it. */
  readonly state: string;
  /** Reports to `events` from now on; undefined: to nobody. */
  reportTo(events: RunEvents | undefined): void;
}

/** What gives a run its reporter as it starts: undefined when nobody follows its workflow. */
export interface RunFollowSource {
  eventsFor(run: FollowableRun): RunEvents | undefined;
}
