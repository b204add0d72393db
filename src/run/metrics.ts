/**
 * A run's metrics (docs/operating.md "Runs", "The stop handshake and the drain"): the calls
 * to the workflow service it opens and how they end, its actions, its acceptance, its stop
 * handshake, and the starts refused before a run existed — by a cap (the WebSocket route's
 * and the follow's caps are counted here too, each through its own part's metrics) or
 * otherwise, on every transport.
 */
import * as grpc from '@grpc/grpc-js';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { connectionErrorTypes, type ConnectionErrorType } from '../core/errors';
import { endReasons, transportLabels, transportLabelValues, type EndReason, type Transport } from '../core/vocabulary';
import { MS_TO_SECONDS_BUCKETS, Tally, oneOf, PartMetrics } from '../observability/metric-helpers';
import { actionKinds } from '../workflow/contract';
import { stopOutcomes, type StopOutcome } from '../workflow/workflow-stream';
import { acceptedOn, capKinds, type AcceptedOn, type CapKind } from './words';

const grpcCodeNames = Object.keys(grpc.status).filter((k) => Number.isNaN(Number(k)));

function grpcCodeName(code: number): string {
  return grpc.status[code] ?? 'other';
}

export class RunMetrics extends PartMetrics {
  readonly callsOpened = new Counter({
    name: 'longrun_connections_total',
    help: "Runs that opened a call to the workflow service (an ExecuteWorkflow stream), by transport; named after Workhorse's connections_total.",
    labelNames: ['transport'],
    registers: [this.registry],
  });
  readonly callsOpen = new Gauge({
    name: 'longrun_connections_open',
    help: 'Calls to the workflow service (ExecuteWorkflow streams) open now, by transport.',
    labelNames: ['transport'],
    registers: [this.registry],
  });
  readonly connectionErrors = new Counter({
    name: 'longrun_connection_errors_total',
    help: 'Starts (an execute, a WebSocket upgrade or startRequest) refused before a run started, by transport and error type.',
    labelNames: ['transport', 'error_type'],
    registers: [this.registry],
  });
  readonly workflowCalls = new Counter({
    name: 'longrun_sessions_total',
    help: "Calls to the workflow service (ExecuteWorkflow streams) ended, by final gRPC code; named after Workhorse's sessions_total (not WebSocket sessions).",
    labelNames: ['code'],
    registers: [this.registry],
  });
  readonly workflowCallErrors = new Counter({
    name: 'longrun_session_errors_total',
    help: 'Calls to the workflow service (ExecuteWorkflow streams) that ended with a non-OK gRPC code.',
    labelNames: ['code'],
    registers: [this.registry],
  });
  readonly workflowCallDuration = new Histogram({
    name: 'longrun_session_duration_seconds',
    help: 'Calls to the workflow service (ExecuteWorkflow streams): how long each lasted, by transport (named as longrun_sessions_total).',
    labelNames: ['transport'],
    // From sub-second rejections to the one-hour stream cap; 3300 is the default run limit.
    buckets: [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 2700, 3300, 3600],
    registers: [this.registry],
  });
  readonly teardowns = new Counter({
    name: 'longrun_teardowns_total',
    help: 'Runs ended, by transport and reason.',
    labelNames: ['transport', 'reason'],
    registers: [this.registry],
  });
  readonly endsWhileStopping = new Counter({
    name: 'longrun_ends_while_stopping_total',
    help: 'Runs whose infrastructure stop crossed an OK end with no checkpoint saying the turn was over (reported with ended_while_stopping).',
    labelNames: ['transport'],
    registers: [this.registry],
  });
  readonly acceptDuration = new Histogram({
    name: 'longrun_accept_duration_seconds',
    help: 'Detached execute: time from startRequest sent to acceptance (the 202).',
    labelNames: ['accepted_on'],
    // Milliseconds (a first action already queued) to the accept wait (10 s default) and a little over.
    buckets: MS_TO_SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly stopAckDuration = new Histogram({
    name: 'longrun_stop_ack_duration_seconds',
    help: 'Stop handshake: stopWorkflow sent to call end.',
    labelNames: ['outcome'],
    // An ack takes milliseconds; the ack timeout (10 s default) bounds the rest.
    buckets: MS_TO_SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly stopAcks = new Counter({ name: 'longrun_stop_acks_total', help: 'Stop handshakes, by outcome.', labelNames: ['outcome'], registers: [this.registry] });
  private readonly actionTally = new Tally();
  readonly actions: Counter = new Counter({
    name: 'longrun_actions_total',
    help: 'Actions received from the workflow service, by type.',
    labelNames: ['type'],
    registers: [this.registry],
    collect: () => this.actionTally.flushInto(this.actions),
  });
  readonly capRejections = new Counter({ name: 'longrun_cap_rejections_total', help: 'Executes refused by a cap, by cap.', labelNames: ['cap'], registers: [this.registry] });
  readonly runsInFlight = new Gauge({
    name: 'longrun_runs_in_flight',
    help: 'Runs in flight in this process, by transport.',
    labelNames: ['transport'],
    registers: [this.registry],
  });
  readonly maxDetachedRuns = new Gauge({
    name: 'longrun_max_detached_runs',
    help: 'LONGRUN_MAX_DETACHED_RUNS: the detached runs this process may hold.',
    registers: [this.registry],
  });

  constructor(registry: Registry) {
    super(registry);
    this.zero();
  }

  /** Zero-initialises what dashboards divide or alert on, so they see 0 rather than no data, and so rate() counts the first increment of a series. */
  private zero(): void {
    for (const transport of transportLabelValues) {
      this.callsOpened.inc({ transport }, 0);
      this.callsOpen.set({ transport }, 0);
      this.runsInFlight.set({ transport }, 0);
      this.workflowCallDuration.zero({ transport });
      for (const reason of endReasons) this.teardowns.inc({ transport, reason }, 0);
      this.endsWhileStopping.inc({ transport }, 0);
      for (const type of connectionErrorTypes) this.connectionErrors.inc({ transport, error_type: type }, 0);
    }
    for (const on of acceptedOn) this.acceptDuration.zero({ accepted_on: on });
    this.workflowCalls.inc({ code: 'OK' }, 0);
    for (const cap of capKinds) this.capRejections.inc({ cap }, 0);
    for (const outcome of stopOutcomes) this.stopAcks.inc({ outcome }, 0);
  }

  /** A run opened its call to the workflow service; `inFlight` runs of its transport are held now. */
  runOpened(transport: Transport, inFlight: number): void {
    const label = { transport: transportLabels[transport] };
    this.callsOpened.inc(label);
    this.callsOpen.inc(label);
    this.runsInFlight.set(label, inFlight);
  }

  /** A run ended; `inFlight` runs of its transport are held now. */
  runClosed(transport: Transport, inFlight: number): void {
    const label = { transport: transportLabels[transport] };
    this.callsOpen.dec(label);
    this.runsInFlight.set(label, inFlight);
  }

  connectionError(transport: Transport, errorType: ConnectionErrorType): void {
    this.connectionErrors.inc({ transport: transportLabels[transport], error_type: errorType });
  }

  /** A run's call to the workflow service ended (longrun_sessions_total, after Workhorse's name). */
  workflowCallEnded(code: number, transport: Transport, durationS: number): void {
    const name = oneOf(grpcCodeName(code), grpcCodeNames);
    this.workflowCalls.inc({ code: name });
    if (code !== grpc.status.OK) this.workflowCallErrors.inc({ code: name });
    this.workflowCallDuration.observe({ transport: transportLabels[transport] }, durationS);
  }

  teardown(transport: Transport, reason: EndReason, endedWhileStopping: boolean): void {
    this.teardowns.inc({ transport: transportLabels[transport], reason });
    if (endedWhileStopping) this.endsWhileStopping.inc({ transport: transportLabels[transport] });
  }

  /** An action from the workflow service (its name is the service's: anything off the contract's list is `other`). */
  action(kind: string): void {
    this.actionTally.add(kind, () => ({ type: oneOf(kind, actionKinds) }));
  }

  /** A detached run accepted `durationS` after its startRequest was sent. */
  accepted(on: AcceptedOn, durationS: number): void {
    this.acceptDuration.observe({ accepted_on: on }, durationS);
  }

  stopAck(outcome: StopOutcome, durationS: number): void {
    this.stopAcks.inc({ outcome });
    this.stopAckDuration.observe({ outcome }, durationS);
  }

  capRejection(cap: CapKind): void {
    this.capRejections.inc({ cap });
  }
}
