/**
 * The runs in flight in this process: what /runs lists, what the detached cap counts
 * (pending admissions included) and what a drain stops.
 */
import type { EndReason, Transport, TransportLabel } from '../core/vocabulary';
import { STOPS, type StopReason } from './stop-reasons';
import type { FollowableRun } from './run-events';

export interface RunInfo {
  workflow_id: string;
  run_id: string;
  transport: TransportLabel;
  state: string;
  started_at: string;
  last_action_at: string | null;
  actions: number;
  /** A WebSocket session's run waiting for its client: when its connection was lost. */
  parked_at?: string;
  /** A WebSocket session's run whose client re-attached on another replica (a bridge, docs/spec.md §12): that replica's id. */
  socket_replica?: string;
}

/** What the registry needs of a run (and a follow of its workflow, docs/spec.md §14). */
export interface RegisteredRun extends FollowableRun {
  readonly id: string;
  readonly workflowId: string;
  readonly transport: Transport;
  info(): RunInfo;
  /** Stops the run; resolves when it has ended and cleaned up, with why it ended. */
  stop(reason: StopReason): Promise<{ readonly reason: EndReason }>;
}

/** The process is closing: what is still in flight is cancelled, as if its caller were gone. */
const CLOSING = STOPS.client_gone;

export class RunRegistry {
  private readonly runs = new Map<string, RegisteredRun>();
  // Kept as runs come and go: count() is read on every run's start and end, where a scan
  // of ten thousand runs each time would make a ramp to the cap quadratic.
  private readonly byTransport = new Map<Transport, number>();
  private detachedSlots = 0;

  constructor(private readonly maxDetachedRuns: number) {}

  /**
   * Takes a detached slot; false when the process cap is reached. The taker gives it back
   * once with releaseDetached() (the Reservation does, in its one release()).
   */
  reserveDetached(): boolean {
    if (this.detachedSlots >= this.maxDetachedRuns) return false;
    this.detachedSlots += 1;
    return true;
  }

  releaseDetached(): void {
    this.detachedSlots = Math.max(0, this.detachedSlots - 1);
  }

  add(run: RegisteredRun): void {
    if (this.runs.has(run.id)) return;
    this.runs.set(run.id, run);
    this.byTransport.set(run.transport, this.count(run.transport) + 1);
  }

  remove(run: RegisteredRun): void {
    if (this.runs.delete(run.id)) this.byTransport.set(run.transport, this.count(run.transport) - 1);
  }

  get size(): number {
    return this.runs.size;
  }

  /** Detached slots taken (runs and admissions in progress). */
  get detachedHeld(): number {
    return this.detachedSlots;
  }

  count(transport: Transport): number {
    return this.byTransport.get(transport) ?? 0;
  }

  list(): RunInfo[] {
    return [...this.runs.values()].map((run) => run.info());
  }

  /**
   * The runs of `workflowId` in flight here (one, unless the owner lets runs of a workflow
   * overlap). A scan: asked only when a follow of the workflow begins (docs/spec.md §14),
   * so that no run pays for an index.
   */
  runsOf(workflowId: string): RegisteredRun[] {
    const found: RegisteredRun[] = [];
    for (const run of this.runs.values()) if (run.workflowId === workflowId) found.push(run);
    return found;
  }

  /** Stops every run in flight concurrently (the drain); resolves when all have ended. `onEnded` hears each end. */
  async stopAll(reason: StopReason, onEnded?: (run: RegisteredRun, reason: EndReason) => void): Promise<void> {
    await Promise.allSettled([...this.runs.values()].map((run) => (onEnded ? run.stop(reason).then((result) => onEnded(run, result.reason)) : run.stop(reason))));
  }

  /** Cancels every run in flight at once (last resort when closing: no handshake). */
  cancelAll(): void {
    for (const run of this.runs.values()) void run.stop(CLOSING);
  }
}
