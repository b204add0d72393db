/**
 * The follow's metrics (docs/operating.md "Following runs"): follow streams open, the events
 * written to them, those dropped and resynced, and the batches appended to the workflows'
 * logs. A follow refused by a cap is counted with the run's refusals (run/metrics.ts).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import { Tally, PartMetrics } from '../observability/metric-helpers';
import type { RunMetrics } from '../run/metrics';
import { followDropReasons, followEventKinds, type FollowDropReason, type FollowEventKind } from './words';

const appendResults = ['ok', 'error'] as const;

export class FollowMetrics extends PartMetrics {
  readonly followersOpen = new Gauge({
    name: 'longrun_followers_open',
    help: 'Follow streams (GET …/workflows/:id/follow, docs/spec.md §14) open now.',
    registers: [this.registry],
  });
  private readonly followEventTally = new Tally();
  readonly followEvents: Counter = new Counter({
    name: 'longrun_follow_events_sent_total',
    help: 'Events written to follow streams, by kind (one per follower: an event two followers get counts twice).',
    labelNames: ['kind'],
    registers: [this.registry],
    collect: () => this.followEventTally.flushInto(this.followEvents),
  });
  readonly followersDropped = new Counter({
    name: 'longrun_followers_dropped_total',
    help: 'Follow streams the gateway ended before idle, by why (slow: its buffer passed LONGRUN_FOLLOW_BUFFER_BYTES; drain; closing). The client resumes by Last-Event-ID.',
    labelNames: ['why'],
    registers: [this.registry],
  });
  readonly followResyncs = new Counter({
    name: 'longrun_follow_resyncs_total',
    help: 'Follow streams resumed from an id older than the backlog (or across lost events): they went on from the latest checkpoint, marked resync.',
    registers: [this.registry],
  });
  readonly followAppends = new Counter({
    name: 'longrun_follow_appends_total',
    help: "Batches of a followed run's events written to its workflow's log, by result (error: the events were lost; the next checkpoint is marked resync).",
    labelNames: ['result'],
    registers: [this.registry],
  });

  constructor(
    registry: Registry,
    /** Where a follow refused by a cap is counted (longrun_cap_rejections_total). */
    private readonly run: RunMetrics,
  ) {
    super(registry);
    for (const why of followDropReasons) this.followersDropped.inc({ why }, 0);
    for (const kind of followEventKinds) this.followEvents.inc({ kind }, 0);
    for (const result of appendResults) this.followAppends.inc({ result }, 0);
    this.followersOpen.set(0);
  }

  /** An event written to one follow stream. */
  followEvent(kind: FollowEventKind): void {
    this.followEventTally.add(kind, () => ({ kind }));
  }

  /** A follow stream the gateway ended before idle. */
  followerDropped(why: FollowDropReason): void {
    this.followersDropped.inc({ why });
  }

  /** A batch of a followed run's events appended to its workflow's log, or lost. */
  followAppended(result: (typeof appendResults)[number]): void {
    this.followAppends.inc({ result });
  }

  /** A follow refused by a cap. */
  capRejection(cap: 'followers' | 'workflow_followers'): void {
    this.run.capRejection(cap);
  }
}
