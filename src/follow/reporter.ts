/**
 * A followed run's reporter (docs/spec.md §14): the RunEvents the run holds while its workflow
 * is followed. It turns what the run tells it into the log's events — `run` as it is made (at
 * the run's start, or when a follow begins mid-run), then `checkpoint` (the Action as its
 * ndjson line carries it), `action` (kind and request id, never the payload), `parked`,
 * `attached`, `end` (the segment-end callback's reason and in_flight) — and hands them to
 * the publisher, which batches and appends them.
 */
import { transportLabels } from '../core/vocabulary';
import type { RunEnded, RunEvents, FollowableRun } from '../run/run-events';
import { resumableSegmentEndReasons } from '../core/vocabulary';
import { workhorseActionJson } from '../workflow/action-line';
import type { Action } from '../workflow/contract';
import type { FollowEvent } from './events';

/** Where a reporter's events go: resolves once appended (or lost), never rejects. */
export type EventOut = (event: FollowEvent) => Promise<void>;

const resumable: ReadonlySet<string> = new Set(resumableSegmentEndReasons);

export class RunReporter implements RunEvents {
  constructor(
    private readonly run: FollowableRun,
    private readonly out: EventOut,
    replica: string,
  ) {
    void out({
      kind: 'run',
      data: JSON.stringify({
        run_id: run.id,
        transport: transportLabels[run.transport],
        replica,
        started_at: new Date(run.startedAt).toISOString(),
        state: run.state,
      }),
    });
  }

  action(action: Action): void {
    if (action.action === 'newCheckpoint') {
      void this.out({ kind: 'checkpoint', data: JSON.stringify(workhorseActionJson(action)) });
      return;
    }
    void this.out({ kind: 'action', data: JSON.stringify({ run_id: this.run.id, kind: action.action ?? 'unknown', request_id: action.requestID ?? '' }) });
  }

  parked(at: number): void {
    void this.out({ kind: 'parked', data: JSON.stringify({ run_id: this.run.id, parked_at: new Date(at).toISOString() }) });
  }

  attached(socketReplica: string | undefined): void {
    void this.out({ kind: 'attached', data: JSON.stringify({ run_id: this.run.id, ...(socketReplica === undefined ? {} : { socket_replica: socketReplica }) }) });
  }

  ended(end: RunEnded): Promise<void> {
    return this.out({
      kind: 'end',
      data: JSON.stringify({
        run_id: this.run.id,
        reason: end.reason,
        in_flight: end.inFlight,
        ...(end.endedWhileStopping ? { ended_while_stopping: true } : {}),
        // Said so a follower need not know the word list: the owner dispatches another segment.
        resumable: resumable.has(end.reason),
      }),
    });
  }
}
