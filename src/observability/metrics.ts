/**
 * Prometheus metrics (docs/spec.md §7), on a registry of their own (never prom-client's global
 * one, so two gateways in one test process do not collide). Label values come from
 * finite vocabularies: anything else is recorded as `other`; never a workflow id, an
 * actor or a path.
 */
import * as grpc from '@grpc/grpc-js';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { connectionErrorTypes, type ConnectionErrorType } from '../core/errors';
import { version } from '../core/version';
import { endReasons, transportLabels, transportLabelValues, type EndReason, type Transport } from '../core/vocabulary';
import { actionKinds } from '../workflow/contract';
import { stopOutcomes, type StopOutcome } from '../workflow/workflow-stream';
import { StoreMetrics } from './store-metrics';

/**
 * The label words that belong to the features on the floors above this one (coordination,
 * owner, mcp, run, websocket, follow): each is that feature's own `as const` list, handed
 * in by the one file that sees them all (src/metric-words.ts), so this floor imports none
 * of them. Words of this floor and below (transports, end reasons, action kinds, stop
 * outcomes, connection error types) are imported. A value off its list is recorded as
 * `other`; every listed one starts at 0.
 */
export interface MetricWords {
  /** run/words.ts */
  acceptedOn: readonly string[];
  capKinds: readonly string[];
  /** coordination/words.ts (the Redis connection words move to src/redis/ with the connections) */
  lockOps: readonly string[];
  lockResults: readonly string[];
  lockOutcomes: ReadonlyArray<readonly [string, string]>;
  leaseBatchOps: readonly string[];
  redisConnections: readonly string[];
  redisEvents: readonly string[];
  /** owner/words.ts */
  relayErrorTypes: readonly string[];
  callbackResults: readonly string[];
  /** mcp/words.ts */
  mcpServerKinds: readonly string[];
  mcpCallResults: readonly string[];
  mcpDiscoveryFailures: readonly string[];
  /** websocket/words.ts */
  parkEndReasons: readonly string[];
  bridgeBreakWhys: readonly string[];
  /** follow/words.ts */
  followEventKinds: readonly string[];
  followDropReasons: readonly string[];
}

const relayMethods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'] as const;
/** The close codes the gateway sends (close-codes.ts), as metric labels. */
const websocketCloseCodes = ['1000', '1001', '1008', '1009', '1012', '1013', '4400'] as const;

const grpcCodeNames = Object.keys(grpc.status).filter((k) => Number.isNaN(Number(k)));

/**
 * prom-client's default metrics include three gauges named `*_total`
 * (nodejs_active_{handles,requests,resources}_total), which `promtool check metrics`
 * rejects: only counters may end in _total. Their per-type siblings without the suffix
 * carry the same information (sum them), so these are dropped.
 */
const lintFailingDefaults = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

function oneOf(value: string, vocabulary: readonly string[]): string {
  return vocabulary.includes(value) ? value : 'other';
}

function grpcCodeName(code: number): string {
  return grpc.status[code] ?? 'other';
}

function statusClass(status: number): string {
  return status >= 100 && status < 600 ? `${Math.floor(status / 100)}xx` : 'other';
}

/** Milliseconds to the 10 s defaults (accept wait, stop-ack timeout) and a little over. */
const MS_TO_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15];

/**
 * Increments of one counter on the action path (one or two per relayed action), tallied
 * in plain numbers by label values and handed to prom-client when the registry is read
 * (the counter's `collect`). prom-client's inc() hashes and validates the labels on
 * every call; a scrape every few seconds pays that once per label set instead.
 */
class Tally {
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

export class Metrics {
  readonly registry = new Registry();

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
  readonly websocketFrames = new Counter({
    name: 'longrun_websocket_frames_total',
    help: 'WebSocket frames, by direction (in: from the client).',
    labelNames: ['direction'],
    registers: [this.registry],
  });
  readonly websocketBytes = new Counter({
    name: 'longrun_websocket_bytes_total',
    help: 'WebSocket payload bytes, by direction (in: from the client).',
    labelNames: ['direction'],
    registers: [this.registry],
  });
  readonly websocketCloses = new Counter({
    name: 'longrun_websocket_closes_total',
    help: 'Close frames the gateway sent, by code.',
    labelNames: ['code'],
    registers: [this.registry],
  });
  readonly websocketParked = new Counter({
    name: 'longrun_websocket_parked_total',
    help: 'WebSocket sessions whose connection was lost while their run went on (parked).',
    registers: [this.registry],
  });
  readonly websocketReattaches = new Counter({
    name: 'longrun_websocket_reattached_total',
    help: 'Parked WebSocket runs a new connection took over, by how (local: on this replica; bridged: from another, through Redis), counted on the replica holding the run.',
    labelNames: ['how'],
    registers: [this.registry],
  });
  readonly websocketParkEnds = new Counter({
    name: 'longrun_websocket_park_ends_total',
    help: 'Parked WebSocket runs longrun stopped, by why (expired, backlog_full, backlog_budget, taken_over).',
    labelNames: ['why'],
    registers: [this.registry],
  });
  readonly bridgesOpen = new Gauge({
    name: 'longrun_bridges_open',
    help: "Bridged WebSocket sessions, by this replica's side (holder: it holds the run; socket: the client's socket).",
    labelNames: ['side'],
    registers: [this.registry],
  });
  readonly bridgeMessages = new Counter({
    name: 'longrun_bridge_messages_total',
    help: 'Bridge messages sent to other replicas through Redis, by kind.',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly bridgeBreaks = new Counter({
    name: 'longrun_bridge_breaks_total',
    help: 'Bridges given up, by why (gap: a message lost; send_failed; peer_silent: no beat within LONGRUN_WS_PONG_TIMEOUT_MS; peer_dropped: the other side no longer lists it; unanswered: a claim not answered).',
    labelNames: ['why'],
    registers: [this.registry],
  });
  readonly websocketBacklogBytes = new Gauge({ name: 'longrun_websocket_backlog_bytes', help: 'Bytes of frames kept for parked WebSocket runs.', registers: [this.registry] });
  readonly websocketReattachDuration = new Histogram({
    name: 'longrun_websocket_reattach_seconds',
    help: 'A parked WebSocket run: its connection lost → a new one attached and replayed to.',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });
  readonly websocketSessionsOpen = new Gauge({
    name: 'longrun_websocket_sessions_open',
    help: 'WebSocket sessions held now (LONGRUN_MAX_WS_SESSIONS caps them).',
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
  private readonly relayTally = new Tally();
  readonly relayActions: Counter = new Counter({
    name: 'longrun_http_relay_actions_total',
    help: 'runHTTPRequest actions relayed to the owner, by method and status class.',
    labelNames: ['method', 'status'],
    registers: [this.registry],
    collect: () => this.relayTally.flushInto(this.relayActions),
  });
  readonly relayDuration = new Histogram({
    name: 'longrun_http_relay_duration_seconds',
    help: 'runHTTPRequest relay duration (successful relays).',
    // The relay timeout is 5 s; 10 s catches relays run without it.
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  /** relayDuration's one series, its observe() made once (not a closure per call). */
  private readonly observeRelayDuration = this.relayDuration.labels().observe;
  readonly relayErrors = new Counter({
    name: 'longrun_http_relay_errors_total',
    help: 'runHTTPRequest actions answered with an error, by type.',
    labelNames: ['type'],
    registers: [this.registry],
  });
  readonly mcpCalls = new Counter({
    name: 'longrun_mcp_calls_total',
    help: 'runMCPTool calls for a tool a configured MCP server offers, by server kind and result.',
    labelNames: ['server_kind', 'result'],
    registers: [this.registry],
  });
  readonly mcpCallDuration = new Histogram({
    name: 'longrun_mcp_call_duration_seconds',
    help: 'runMCPTool calls made on an MCP server, from sent to answered, by server kind.',
    labelNames: ['server_kind'],
    // From a quick lookup to the call deadline (30 s default) and a little over.
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly mcpDiscoveryFailures = new Counter({
    name: 'longrun_mcp_discovery_failures_total',
    help: 'Configured MCP servers left out of a run at its start (refused, timed out or failed), by server kind and reason.',
    labelNames: ['server_kind', 'reason'],
    registers: [this.registry],
  });
  readonly mcpDiscoveryDuration = new Histogram({
    name: 'longrun_mcp_discovery_duration_seconds',
    help: 'Time to connect to and list the tools of every MCP server of a run (runs with MCP servers), before its start is sent.',
    // Bounded by the discovery deadline (5 s default) and the accept wait.
    buckets: MS_TO_SECONDS_BUCKETS,
    registers: [this.registry],
  });
  private readonly actionTally = new Tally();
  readonly actions: Counter = new Counter({
    name: 'longrun_actions_total',
    help: 'Actions received from the workflow service, by type.',
    labelNames: ['type'],
    registers: [this.registry],
    collect: () => this.actionTally.flushInto(this.actions),
  });
  readonly lockOperations = new Counter({
    name: 'longrun_lock_operations_total',
    help: 'Lock operations, by op and result.',
    labelNames: ['op', 'result'],
    registers: [this.registry],
  });
  readonly leaseBatchDuration = new Histogram({
    name: 'longrun_lease_batch_duration_seconds',
    help: 'Batched lease work sent to the coordination store (one renewal batch per keeper tick, one release batch per turn of the event loop), sent to answered, by op.',
    labelNames: ['op'],
    // A batch is a script call or a few: about a millisecond; the command timeout (2 s) bounds it.
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly leaseBatchLeases = new Histogram({
    name: 'longrun_lease_batch_leases',
    help: 'Leases in one batch of lease work, by op.',
    labelNames: ['op'],
    // From one lease to a drain of the whole process (LONGRUN_MAX_DETACHED_RUNS, 10 000).
    buckets: [1, 5, 25, 100, 250, 500, 1000, 2500, 5000, 10000],
    registers: [this.registry],
  });
  readonly lateRenewals = new Counter({
    name: 'longrun_lease_renewals_late_total',
    help: 'Lease renewals confirmed more than one keeper tick after they were due (TTL/3 after the previous confirmation): the process or the store is falling behind.',
    registers: [this.registry],
  });
  readonly unlockedRuns = new Counter({
    name: 'longrun_unlocked_runs_total',
    help: 'Blocking runs started without the lock because Redis failed (Workhorse parity).',
    registers: [this.registry],
  });
  readonly callbacks = new Counter({ name: 'longrun_callbacks_total', help: 'Segment-end callbacks, by result.', labelNames: ['result'], registers: [this.registry] });
  readonly capRejections = new Counter({ name: 'longrun_cap_rejections_total', help: 'Executes refused by a cap, by cap.', labelNames: ['cap'], registers: [this.registry] });
  readonly runsInFlight = new Gauge({
    name: 'longrun_runs_in_flight',
    help: 'Runs in flight in this process, by transport.',
    labelNames: ['transport'],
    registers: [this.registry],
  });
  readonly draining = new Gauge({ name: 'longrun_draining', help: '1 while the process drains after SIGTERM.', registers: [this.registry] });
  readonly drainDeadline = new Gauge({
    name: 'longrun_drain_deadline_timestamp_seconds',
    help: 'Unix time at which the drain budget (shutdown delay + drain timeout) runs out; 0 while serving.',
    registers: [this.registry],
  });
  readonly maxDetachedRuns = new Gauge({
    name: 'longrun_max_detached_runs',
    help: 'LONGRUN_MAX_DETACHED_RUNS: the detached runs this process may hold.',
    registers: [this.registry],
  });
  readonly maxWsSessions = new Gauge({
    name: 'longrun_max_ws_sessions',
    help: 'LONGRUN_MAX_WS_SESSIONS: the WebSocket sessions this process may hold.',
    registers: [this.registry],
  });
  readonly redisEvents = new Counter({
    name: 'longrun_redis_connection_events_total',
    help: 'Events of the connections to the coordination store (Redis), by connection and event.',
    labelNames: ['connection', 'event'],
    registers: [this.registry],
  });
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
  readonly traceExportFailures = new Counter({
    name: 'longrun_trace_export_failures_total',
    help: 'Batches of spans the OTLP exporter gave up on (the collector refused, failed or did not answer in time); their spans are lost, no run is affected.',
    registers: [this.registry],
  });
  readonly buildInfo = new Gauge({ name: 'longrun_build_info', help: 'Always 1; the version label says which longrun runs.', labelNames: ['version'], registers: [this.registry] });
  /** The Redis lock store: each primary's fence and maxmemory-policy (store-metrics.ts). */
  readonly store = new StoreMetrics(this.registry);

  constructor(
    private readonly words: MetricWords,
    options: { defaultMetrics?: boolean } = {},
  ) {
    if (options.defaultMetrics ?? true) {
      collectDefaultMetrics({ register: this.registry });
      for (const name of lintFailingDefaults) this.registry.removeSingleMetric(name);
    }
    for (const how of ['local', 'bridged']) this.websocketReattaches.inc({ how }, 0);
    for (const why of words.bridgeBreakWhys) this.bridgeBreaks.inc({ why }, 0);
    for (const side of ['holder', 'socket']) this.bridgesOpen.set({ side }, 0);
    for (const why of words.parkEndReasons) this.websocketParkEnds.inc({ why }, 0);
    for (const direction of ['in', 'out']) {
      this.websocketFrames.inc({ direction }, 0);
      this.websocketBytes.inc({ direction }, 0);
    }
    for (const code of websocketCloseCodes) this.websocketCloses.inc({ code }, 0);
    // Zero-initialise what dashboards divide or alert on, so they see 0 rather than no
    // data, and so rate() counts the first increment of a series.
    for (const transport of transportLabelValues) {
      this.callsOpened.inc({ transport }, 0);
      this.callsOpen.set({ transport }, 0);
      this.runsInFlight.set({ transport }, 0);
      this.workflowCallDuration.zero({ transport });
      for (const reason of endReasons) this.teardowns.inc({ transport, reason }, 0);
      this.endsWhileStopping.inc({ transport }, 0);
      for (const type of connectionErrorTypes) this.connectionErrors.inc({ transport, error_type: type }, 0);
    }
    for (const on of words.acceptedOn) this.acceptDuration.zero({ accepted_on: on });
    this.workflowCalls.inc({ code: 'OK' }, 0);
    for (const [op, result] of words.lockOutcomes) this.lockOperations.inc({ op, result }, 0);
    for (const op of words.leaseBatchOps) {
      this.leaseBatchDuration.zero({ op });
      this.leaseBatchLeases.zero({ op });
    }
    for (const result of words.callbackResults) this.callbacks.inc({ result }, 0);
    for (const cap of words.capKinds) this.capRejections.inc({ cap }, 0);
    for (const type of words.relayErrorTypes) this.relayErrors.inc({ type }, 0);
    for (const outcome of stopOutcomes) this.stopAcks.inc({ outcome }, 0);
    for (const kind of words.mcpServerKinds) {
      this.mcpCallDuration.zero({ server_kind: kind });
      for (const result of words.mcpCallResults) this.mcpCalls.inc({ server_kind: kind, result }, 0);
      for (const reason of words.mcpDiscoveryFailures) this.mcpDiscoveryFailures.inc({ server_kind: kind, reason }, 0);
    }
    for (const connection of words.redisConnections) for (const event of words.redisEvents) this.redisEvents.inc({ connection, event }, 0);
    for (const why of words.followDropReasons) this.followersDropped.inc({ why }, 0);
    for (const kind of words.followEventKinds) this.followEvents.inc({ kind }, 0);
    for (const result of ['ok', 'error']) this.followAppends.inc({ result }, 0);
    this.followersOpen.set(0);
    this.draining.set(0);
    this.drainDeadline.set(0);
    this.buildInfo.set({ version }, 1);
  }

  /** A WebSocket frame of `bytes`, from the client ('in') or to it ('out'). */
  websocketFrame(direction: 'in' | 'out', bytes: number): void {
    this.websocketFrames.inc({ direction });
    this.websocketBytes.inc({ direction }, bytes);
  }

  /** A parked run a new connection took over after `lostForS`. */
  websocketReattached(how: 'local' | 'bridged', lostForS: number): void {
    this.websocketReattaches.inc({ how });
    this.websocketReattachDuration.observe(lostForS);
  }

  /** A parked run longrun stopped. */
  websocketParkEnd(why: string): void {
    this.websocketParkEnds.inc({ why: oneOf(why, this.words.parkEndReasons) });
  }

  /** A close frame the gateway sent, by code (Workhorse's codes; anything else `other`). */
  websocketClose(code: number): void {
    this.websocketCloses.inc({ code: oneOf(String(code), websocketCloseCodes) });
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
    this.connectionErrors.inc({ transport: transportLabels[transport], error_type: oneOf(errorType, connectionErrorTypes) });
  }

  /** A run's call to the workflow service ended (longrun_sessions_total, after Workhorse's name). */
  workflowCallEnded(code: number, transport: Transport, durationS: number): void {
    const name = oneOf(grpcCodeName(code), grpcCodeNames);
    this.workflowCalls.inc({ code: name });
    if (code !== grpc.status.OK) this.workflowCallErrors.inc({ code: name });
    this.workflowCallDuration.observe({ transport: transportLabels[transport] }, durationS);
  }

  teardown(transport: Transport, reason: EndReason, endedWhileStopping: boolean): void {
    this.teardowns.inc({ transport: transportLabels[transport], reason: oneOf(reason, endReasons) });
    if (endedWhileStopping) this.endsWhileStopping.inc({ transport: transportLabels[transport] });
  }

  action(kind: string): void {
    this.actionTally.add(kind, () => ({ type: oneOf(kind, actionKinds) }));
  }

  relay(method: string, status: number, durationS: number): void {
    this.relayTally.add(`${method} ${status}`, () => ({ method: oneOf(method.toUpperCase(), relayMethods), status: statusClass(status) }));
    this.observeRelayDuration(durationS);
  }

  relayError(type: string): void {
    this.relayErrors.inc({ type: oneOf(type, this.words.relayErrorTypes) });
  }

  /** One runMCPTool call on a server; `durationS` when the server was called. */
  mcpCall(kind: string, result: string, durationS?: number): void {
    const serverKind = oneOf(kind, this.words.mcpServerKinds);
    this.mcpCalls.inc({ server_kind: serverKind, result: oneOf(result, this.words.mcpCallResults) });
    if (durationS !== undefined) this.mcpCallDuration.observe({ server_kind: serverKind }, durationS);
  }

  mcpDiscoveryFailure(kind: string, reason: string): void {
    this.mcpDiscoveryFailures.inc({ server_kind: oneOf(kind, this.words.mcpServerKinds), reason: oneOf(reason, this.words.mcpDiscoveryFailures) });
  }

  mcpDiscovery(durationS: number): void {
    this.mcpDiscoveryDuration.observe(durationS);
  }

  lock(op: string, result: string): void {
    this.lockOperations.inc({ op: oneOf(op, this.words.lockOps), result: oneOf(result, this.words.lockResults) });
  }

  /** One batch of lease work (lease-keeper.ts): how many leases, how long the store took. */
  leaseBatch(op: string, leases: number, durationS: number): void {
    const label = oneOf(op, this.words.leaseBatchOps);
    this.leaseBatchDuration.observe({ op: label }, durationS);
    this.leaseBatchLeases.observe({ op: label }, leases);
  }

  stopAck(outcome: StopOutcome, durationS: number): void {
    const label = oneOf(outcome, stopOutcomes);
    this.stopAcks.inc({ outcome: label });
    this.stopAckDuration.observe({ outcome: label }, durationS);
  }

  callback(result: string): void {
    this.callbacks.inc({ result: oneOf(result, this.words.callbackResults) });
  }

  capRejection(cap: string): void {
    this.capRejections.inc({ cap: oneOf(cap, this.words.capKinds) });
  }

  /** An event written to one follow stream. */
  followEvent(kind: string): void {
    this.followEventTally.add(kind, () => ({ kind: oneOf(kind, this.words.followEventKinds) }));
  }

  /** A follow stream the gateway ended before idle. */
  followerDropped(why: string): void {
    this.followersDropped.inc({ why: oneOf(why, this.words.followDropReasons) });
  }

  redisEvent(connection: string, event: string): void {
    this.redisEvents.inc({ connection: oneOf(connection, this.words.redisConnections), event: oneOf(event, this.words.redisEvents) });
  }
}
