/**
 * What a run's record in Redis says of it (docs/spec.md §5 run record, §6 `in_flight`),
 * kept in memory as the run goes: its state, its last action, the relayed actions still
 * unanswered. The run tells it each change as it happens; the record write and every
 * lease renewal read it from here, so nothing reaches into the run to learn them.
 */
import type { InFlightEntry } from '@longrun/client';
import type { RecordRefresh, StoredRunRecord } from './backend';
import type { TransportLabel } from '../core/vocabulary';

export class RunSnapshot {
  private state = 'starting';
  private lastAction: number | undefined;
  /** Relayed actions whose answer has not reached the service yet, by requestID; made with the first. */
  private unanswered: Map<string, InFlightEntry> | undefined;
  private changes = 0;

  constructor(
    readonly runId: string,
    private readonly replica: string,
    private readonly transport: TransportLabel,
    readonly startedAt: number = Date.now(),
  ) {}

  /** Counts every change of what the record says: equal versions, equal records. */
  get version(): number {
    return this.changes;
  }

  /** The run moved to `state` (starting, running, stopping, ended). */
  noteState(state: string): void {
    this.state = state;
    this.changes += 1;
  }

  /** An action arrived from the service at `at`. */
  noteAction(at: number): void {
    this.lastAction = at;
    this.changes += 1;
  }

  get lastActionAt(): number | undefined {
    return this.lastAction;
  }

  /** A relayed action went out; it is in flight until answered(). */
  relayed(entry: InFlightEntry): void {
    (this.unanswered ??= new Map()).set(entry.request_id, entry);
    this.changes += 1;
  }

  /** The answer to `requestId` reached the service. */
  answered(requestId: string): void {
    if (this.unanswered?.delete(requestId)) this.changes += 1;
  }

  /** The relayed actions unanswered now. */
  inFlight(): InFlightEntry[] {
    return this.unanswered ? [...this.unanswered.values()] : [];
  }

  /** The whole record, as written when the run is accepted (or starts streaming). */
  fields(): StoredRunRecord {
    return {
      run_id: this.runId,
      replica: this.replica,
      transport: this.transport,
      state: this.state,
      started_at: new Date(this.startedAt).toISOString(),
      last_action_at: this.lastActionIso(),
      in_flight: JSON.stringify(this.inFlight()),
    };
  }

  /** The record's fields a lease renewal rewrites. */
  refresh(): Required<RecordRefresh> {
    return { state: this.state, lastActionAt: this.lastActionIso(), inFlight: JSON.stringify(this.inFlight()) };
  }

  private lastActionIso(): string {
    return this.lastAction === undefined ? '' : new Date(this.lastAction).toISOString();
  }
}
