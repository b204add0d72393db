/**
 * The holder's side of a follow (docs/spec.md §14): the runs of this replica whose workflow
 * someone follows, anywhere, report to the workflow's log. A run gets a reporter as it starts
 * when its workflow is followed then, or when a follow begins later; it loses it when nobody
 * follows any more. A run nobody follows gets nothing: no reporter, no batch, no command.
 *
 * Events are batched per workflow for one turn of the event loop (setImmediate), so a burst
 * of actions is one append, and appended in the order the runs reported them: appends go on
 * one connection, each batch's ids follow the last. A batch the store refused is lost; the
 * workflow's next checkpoint is then marked `resync`, so its followers know it stands for
 * what they missed.
 */
import type { RunEvents, RunFollowSource, FollowableRun } from '../run/run-events';
import type { RunRegistry } from '../run/registry';
import { markedResync, stateAfter, type FollowEntry, type FollowEvent } from './events';
import type { Interest } from './interest';
import type { FollowLog } from './log';
import type { FollowMetrics } from './metrics';
import { RunReporter } from './reporter';

export interface PublisherDeps {
  log: FollowLog;
  interest: Interest;
  registry: RunRegistry;
  metrics: FollowMetrics;
  replicaId: string;
  /** Entries this replica appended: its own followers get them at once (the copy the log delivers later is dropped as seen). */
  appended(workflowId: string, entries: FollowEntry[]): void;
}

interface Batch {
  events: FollowEvent[];
  done: Promise<void>;
  settle(): void;
}

export class FollowPublisher implements RunFollowSource {
  /** Reporting runs, by workflow. */
  private readonly reporting = new Map<string, Map<FollowableRun, RunReporter>>();
  private pending = new Map<string, Batch>();
  private flushing: NodeJS.Immediate | undefined;
  /** Workflows whose last batch was lost: their next checkpoint is marked resync. */
  private readonly lost = new Set<string>();

  constructor(private readonly deps: PublisherDeps) {}

  /** RunFollowSource: a reporter when the workflow is followed, else nothing at all. */
  eventsFor(run: FollowableRun): RunEvents | undefined {
    return this.deps.interest.has(run.workflowId) ? this.reporterOf(run) : undefined;
  }

  /** Runs reporting now (tests, and /metrics through the follow). */
  get size(): number {
    let n = 0;
    for (const runs of this.reporting.values()) n += runs.size;
    return n;
  }

  /** Workflows with a batch waiting to be appended, and with a lost batch to mark (/debug/structures). */
  get held(): { pending: number; lost: number } {
    return { pending: this.pending.size, lost: this.lost.size };
  }

  /** Someone began to follow these workflows: their runs here report from now on (each with its `run` event first). */
  followed(workflowIds: readonly string[]): void {
    for (const workflowId of workflowIds) {
      for (const run of this.deps.registry.runsOf(workflowId)) {
        if (!this.reporting.get(workflowId)?.has(run)) run.reportTo(this.reporterOf(run));
      }
    }
  }

  /** Nobody follows these workflows any more: their runs report to nobody. */
  unfollowed(workflowIds: readonly string[]): void {
    for (const workflowId of workflowIds) {
      for (const run of this.reporting.get(workflowId)?.keys() ?? []) run.reportTo(undefined);
      this.reporting.delete(workflowId);
      // Nobody left to tell: a follower that comes later starts from the log's latest checkpoint.
      this.lost.delete(workflowId);
    }
  }

  private reporterOf(run: FollowableRun): RunReporter {
    let runs = this.reporting.get(run.workflowId);
    if (!runs) this.reporting.set(run.workflowId, (runs = new Map()));
    const reporter = new RunReporter(
      run,
      (event) => {
        // The end is a run's last event: it reports no more.
        if (event.kind === 'end') this.forget(run);
        return this.publish(run.workflowId, event);
      },
      this.deps.replicaId,
    );
    runs.set(run, reporter);
    return reporter;
  }

  private forget(run: FollowableRun): void {
    const runs = this.reporting.get(run.workflowId);
    if (runs?.delete(run) && runs.size === 0) this.reporting.delete(run.workflowId);
  }

  private publish(workflowId: string, event: FollowEvent): Promise<void> {
    let batch = this.pending.get(workflowId);
    if (!batch) {
      let settle = (): void => undefined;
      const done = new Promise<void>((resolve) => (settle = resolve));
      batch = { events: [], done, settle };
      this.pending.set(workflowId, batch);
      this.flushing ??= setImmediate(() => this.flush());
    }
    batch.events.push(event);
    return batch.done;
  }

  private flush(): void {
    this.flushing = undefined;
    const batches = this.pending;
    this.pending = new Map();
    for (const [workflowId, batch] of batches) {
      const events = this.lost.has(workflowId) ? this.markFirstCheckpoint(workflowId, batch.events) : batch.events;
      const state = stateAfter(events[events.length - 1] as FollowEvent);
      this.deps.log.append(workflowId, events, state).then(
        (last) => {
          this.deps.metrics.followAppended('ok');
          const first = last - events.length + 1;
          this.deps.appended(
            workflowId,
            events.map((event, i) => ({ id: first + i, kind: event.kind, data: event.data })),
          );
          batch.settle();
        },
        () => {
          this.deps.metrics.followAppended('error');
          this.lost.add(workflowId);
          batch.settle();
        },
      );
    }
  }

  /** After a lost batch: the first checkpoint says it stands for what was lost. */
  private markFirstCheckpoint(workflowId: string, events: FollowEvent[]): FollowEvent[] {
    const at = events.findIndex((event) => event.kind === 'checkpoint');
    if (at < 0) return events;
    this.lost.delete(workflowId);
    const marked = [...events];
    marked[at] = { kind: 'checkpoint', data: markedResync((events[at] as FollowEvent).data) };
    return marked;
  }
}
