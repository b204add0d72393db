/**
 * The simulated workflow service: a real grpc-js server on a loopback port that plays
 * the scenario named in each StartWorkflowRequest (see scenario.ts), answers
 * stopWorkflow as the real service does (ai-gateway `server.py`: UNAVAILABLE for
 * WORKHORSE_SERVER_SHUTDOWN, OK for every other word; a word off its infrastructure
 * allowlist marks the workflow stopped, and a later resume of it is refused) and records
 * every call for assertions. It also serves TrackSelfHostedExecuteWorkflow,
 * the self-hosted billing stream (a Workhorse with CloudServiceForSelfHosted opens one per
 * connection and sends one event per trackLlmCallForSelfHosted action): every event is
 * recorded and acknowledged, or the stream fails or hangs on demand (`billing`). Used by
 * the sandbox, the tests and the benchmarks; never inside the gateway.
 */
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { duoWorkflowService, type Action, type DecodedClientEvent, type StartWorkflowRequest } from '../src/workflow/contract';
import { H2Front, type PingPolicy } from './h2-front';
import { RECORD_LIMIT, record as keep, remember } from './recorded';
import type { GrpcCodeName } from './scenario';
import { followClientEnd, SimulatedCall, type CallEnd, type CallHost, type CallRecord, type Finish } from './simulated-call';
import { waitForChange } from './wait-for';

export type { CallEnd, CallRecord, Pagination } from './simulated-call';

/**
 * The public service's infrastructure allowlist (ai-gateway
 * `duo_workflow_service/workflows/type_definitions.py` INFRA_STOP_REASONS): a stop with
 * one of these leaves the workflow `running`; every other word is a user stop, persisted
 * as `stopped`. Written here, not imported from the gateway: the simulator stands for
 * the service, whatever the gateway believes of it.
 */
export const defaultInfraStopReasons = ['WORKHORSE_SERVER_SHUTDOWN', 'WORKHORSE_WEBSOCKET_PING_FAILED'] as const;

/** At most this many stopped workflows are remembered (the oldest forgotten first): a sandbox left running stays bounded. */
const STOPPED_WORKFLOWS_KEPT = 100_000;

/** A TrackSelfHostedClientEvent as received (proto3 zero values filled in). */
export interface BillingEvent {
  requestID: string;
  workflowID: string;
  featureQualifiedName: string;
  featureAiCatalogItem: boolean;
  at: number;
}

/** What the simulator saw of one TrackSelfHostedExecuteWorkflow call. */
export interface BillingCallRecord {
  /** Request metadata (headers) as received. */
  metadata: Record<string, string>;
  startedAt: number;
  /** Every event received, answered or not. */
  events: BillingEvent[];
  /** How many were acknowledged (a TrackSelfHostedAction with the event's requestID). */
  answered: number;
  ended?: CallEnd;
}

/**
 * How the billing stream behaves. `answer` (the default): each event is acknowledged with a
 * TrackSelfHostedAction carrying its requestID, as the service does. `fail`: end the call
 * with that status once `afterEvents` events were answered, when the next one arrives
 * (the event is recorded, not answered); without afterEvents at once, when the call opens
 * (what makes a Workhorse fail its runner initialization). `hang`: answer `afterEvents`
 * events (default none), then record the rest and answer nothing, keeping the call open.
 * Read when a call opens and at every event, so it can be switched while calls are open.
 */
export type BillingBehaviour = { mode: 'answer' } | { mode: 'fail'; code: GrpcCodeName; message?: string; afterEvents?: number } | { mode: 'hang'; afterEvents?: number };

interface DecodedTrackSelfHostedClientEvent {
  requestID?: string;
  workflowID?: string;
  featureQualifiedName?: string;
  featureAiCatalogItem?: boolean;
}

interface TrackSelfHostedAction {
  requestID: string;
}

export interface WorkflowSimulatorOptions {
  host?: string;
  port?: number;
  /**
   * The infrastructure allowlist: a stop with one of these words leaves the workflow
   * resumable; any other marks it stopped (default: the public service's,
   * defaultInfraStopReasons). Pass more words to model a service that allowlists
   * WORKHORSE_RUN_LIMIT or WORKHORSE_LOCK_LOST.
   */
  infraStopReasons?: readonly string[];
  /** Ignore stopWorkflow entirely (to test the stop-ack timeout). */
  ignoreStops?: boolean;
  /**
   * End the call OK when a stopWorkflow arrives, without acting on it: what the client
   * sees when the service's own end and the stop cross on the wire (the end was on its
   * way when the stop was written). Deterministic, where the real crossing is a race.
   */
  endsCrossingStops?: boolean;
  /**
   * How long the service takes to end a call after acting on a stop (the real one waits
   * up to 10 s for the workflow task to cancel); default 0. The scenario stops at once;
   * answers that arrive meanwhile go to `answersAfterStop`, unread.
   */
  stopEndDelayMs?: number;
  /** grpc.max_concurrent_streams for the server's HTTP/2 connections. */
  maxConcurrentStreams?: number;
  /** Serve TLS with this PEM key and certificate chain (for Service.Secure). */
  tls?: { key: Buffer; cert: Buffer };
  /**
   * Serve through a frame-reading TCP front (h2-front.ts, plain text only): enforce the
   * real service's ping policy when `pingPolicy` is given (workflowServicePingPolicy is
   * the real one), and allow blackHole().
   */
  front?: { pingPolicy?: PingPolicy; latencyMs?: number };
  /**
   * Where `turn` steps keep their progress (steps done, by workflow and turn id). Pass the
   * same map to a simulator started after this one closed to model a service restart
   * that keeps its checkpoints.
   */
  progress?: Map<string, number>;
  /** How TrackSelfHostedExecuteWorkflow behaves (default: answer every event). */
  billing?: BillingBehaviour;
  /** How many calls (and billing calls, and turns' progress) are kept for assertions, the latest first (recorded.ts). */
  recordLimit?: number;
}

export class WorkflowServiceSimulator {
  readonly calls: CallRecord[] = [];
  /** Every TrackSelfHostedExecuteWorkflow call, in the order they opened. */
  readonly billingCalls: BillingCallRecord[] = [];
  /** How the billing stream behaves now (see BillingBehaviour). */
  billing: BillingBehaviour;
  infraStopReasons: Set<string>;
  /**
   * Workflows a user stop (a word off the allowlist) marked stopped, as the real service
   * persists `stopped` for them: a resume start of one (empty goal, no approval) is
   * refused with INVALID_ARGUMENT; a start with input runs and clears the mark.
   */
  readonly stoppedWorkflows = new Set<string>();
  ignoreStops: boolean;
  endsCrossingStops: boolean;
  stopEndDelayMs: number;
  /** Progress of `turn` steps, by `<workflow id>/<turn id>` (see WorkflowSimulatorOptions.progress). */
  readonly progress: Map<string, number>;
  private readonly recordLimit: number;
  private readonly events = new EventEmitter();
  /** Open calls. */
  private readonly live = new Set<SimulatedCall>();
  /** What each call reads and changes of this service. */
  private readonly callHost: CallHost;
  private readonly billingLive = new Map<grpc.ServerDuplexStream<DecodedTrackSelfHostedClientEvent, TrackSelfHostedAction>, Finish>();
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly server: grpc.Server,
    readonly port: number,
    readonly host: string,
    options: WorkflowSimulatorOptions,
    /** The TCP front clients connect to, when the simulator was started with one. */
    readonly front?: H2Front,
  ) {
    this.infraStopReasons = new Set(options.infraStopReasons ?? defaultInfraStopReasons);
    this.ignoreStops = options.ignoreStops ?? false;
    this.endsCrossingStops = options.endsCrossingStops ?? false;
    this.stopEndDelayMs = options.stopEndDelayMs ?? 0;
    this.progress = options.progress ?? new Map();
    this.recordLimit = options.recordLimit ?? RECORD_LIMIT;
    this.billing = options.billing ?? { mode: 'answer' };
    this.events.setMaxListeners(0);
    front?.onChange(() => this.changed());
    this.callHost = {
      stopHandling: () => ({ ignore: this.ignoreStops, endsCrossing: this.endsCrossingStops, endDelayMs: this.stopEndDelayMs }),
      opened: (record) => {
        keep(this.calls, record, this.recordLimit);
        return this.callsFor(record.workflowId).length;
      },
      closed: (call) => this.live.delete(call),
      changed: () => this.changed(),
      refusesResume: (start) => this.refusesResume(start),
      stopped: (workflowId, reason) => {
        if (!this.infraStopReasons.has(reason)) this.markStopped(workflowId);
      },
      turnProgress: (key) => this.progress.get(key) ?? 0,
      turnStepDone: (key, step) => remember(this.progress, key, step, this.recordLimit),
      billed: (requestID, workflowID, since) => this.billingCalls.some((c) => c.events.some((e) => e.requestID === requestID && e.workflowID === workflowID && e.at >= since)),
    };
  }

  /** Starts the server on host:port (default 127.0.0.1:0). */
  static async start(options: WorkflowSimulatorOptions = {}): Promise<WorkflowServiceSimulator> {
    const host = options.host ?? '127.0.0.1';
    const serverOptions: grpc.ServerOptions = {};
    if (options.maxConcurrentStreams !== undefined) {
      serverOptions['grpc.max_concurrent_streams'] = options.maxConcurrentStreams;
    }
    const server = new grpc.Server(serverOptions);
    let sim: WorkflowServiceSimulator | undefined;
    server.addService(duoWorkflowService, {
      ExecuteWorkflow: (call: grpc.ServerDuplexStream<DecodedClientEvent, Action>) => sim?.handle(call),
      TrackSelfHostedExecuteWorkflow: (call: grpc.ServerDuplexStream<DecodedTrackSelfHostedClientEvent, TrackSelfHostedAction>) => sim?.handleBilling(call),
    });
    if (options.front && options.tls) throw new Error('the front reads HTTP/2 frames: it cannot stand before a TLS server');
    // With a front, the gRPC server takes any port and the front takes the asked one.
    const grpcPort = options.front ? 0 : (options.port ?? 0);
    const hostPort = host.includes(':') ? `[${host}]:${grpcPort}` : `${host}:${grpcPort}`;
    const port = await new Promise<number>((resolve, reject) => {
      const credentials = options.tls
        ? grpc.ServerCredentials.createSsl(null, [{ private_key: options.tls.key, cert_chain: options.tls.cert }])
        : grpc.ServerCredentials.createInsecure();
      server.bindAsync(hostPort, credentials, (err, p) => (err ? reject(err) : resolve(p)));
    });
    if (!options.front) {
      sim = new WorkflowServiceSimulator(server, port, host, options);
      return sim;
    }
    const front = await H2Front.start({ host, port }, { host, port: options.port, pingPolicy: options.front.pingPolicy, latencyMs: options.front.latencyMs });
    sim = new WorkflowServiceSimulator(server, front.port, host, options, front);
    return sim;
  }

  /**
   * Every connection open through the front goes dead: nothing more is forwarded either
   * way and nothing is closed (a dropped route, a frozen peer). Needs the `front` option.
   */
  blackHole(): void {
    if (!this.front) throw new Error('blackHole() needs a simulator started with the front option');
    this.front.blackHole();
  }

  /** host:port, as the owner's Service.URI. */
  get address(): string {
    return this.host.includes(':') ? `[${this.host}]:${this.port}` : `${this.host}:${this.port}`;
  }

  callsFor(workflowId: string): CallRecord[] {
    return this.calls.filter((c) => c.workflowId === workflowId);
  }

  /** Calls that have not ended yet. */
  get openCalls(): number {
    return this.live.size;
  }

  /** Billing calls that have not ended yet. */
  get openBillingCalls(): number {
    return this.billingLive.size;
  }

  /** Resolves when `predicate` holds, re-checked on every recorded change; rejects after timeoutMs. */
  waitFor(predicate: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
    return waitForChange(this.events, 'workflow simulator', predicate, timeoutMs, what);
  }

  /**
   * Ends every open call with UNAVAILABLE (what a client of a service going down sees)
   * and closes the server. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.server.tryShutdown(() => {
        if (this.front) void this.front.close().then(() => resolve());
        else resolve();
      });
      // Open calls would hold tryShutdown forever; end them.
      for (const finish of [...[...this.live].map((call) => call.finish), ...this.billingLive.values()]) finish('status', 'UNAVAILABLE', 'workflow service shutting down');
      // The front goes a moment later, once those statuses are through it (a black-holed
      // connection never lets them through, nor the server's sessions close).
      if (this.front) setTimeout(() => void this.front?.close(), 200).unref();
      setTimeout(() => this.server.forceShutdown(), 2_000).unref();
    });
    return this.closing;
  }

  private changed(): void {
    this.events.emit('change');
  }

  /** One TrackSelfHostedExecuteWorkflow call: record each event, acknowledge it, or fail or hang as `billing` says. */
  private handleBilling(call: grpc.ServerDuplexStream<DecodedTrackSelfHostedClientEvent, TrackSelfHostedAction>): void {
    const metadata: Record<string, string> = {};
    for (const [k, v] of Object.entries(call.metadata.getMap())) metadata[k] = String(v);
    const record: BillingCallRecord = { metadata, startedAt: Date.now(), events: [], answered: 0 };
    keep(this.billingCalls, record, this.recordLimit);
    let ended = false;
    let clearGrace = (): void => undefined;
    const finish: Finish = (how, code, message) => {
      if (ended) return;
      ended = true;
      clearGrace();
      this.billingLive.delete(call);
      record.ended = { how, code, at: Date.now() };
      if (how === 'ok') call.end();
      else if (how === 'status' && code) call.emit('error', { code: grpc.status[code], details: message ?? code });
      this.changed();
    };
    this.billingLive.set(call, finish);
    this.changed();

    const atOpen = this.billing;
    if (atOpen.mode === 'fail' && atOpen.afterEvents === undefined) {
      finish('status', atOpen.code, atOpen.message);
      return;
    }
    call.on('data', (event: DecodedTrackSelfHostedClientEvent) => {
      if (ended) return;
      const received: BillingEvent = {
        requestID: event.requestID ?? '',
        workflowID: event.workflowID ?? '',
        featureQualifiedName: event.featureQualifiedName ?? '',
        featureAiCatalogItem: event.featureAiCatalogItem ?? false,
        at: Date.now(),
      };
      record.events.push(received);
      this.changed();
      const behaviour = this.billing;
      if (behaviour.mode !== 'answer' && record.answered >= (behaviour.afterEvents ?? 0)) {
        if (behaviour.mode === 'fail') finish('status', behaviour.code, behaviour.message);
        return;
      }
      call.write({ requestID: received.requestID });
      record.answered += 1;
      this.changed();
    });
    // Workhorse half-closes its billing stream when the connection ends (stream_manager.go
    // Close); as for ExecuteWorkflow, wait a moment to tell that from a cancel.
    clearGrace = followClientEnd(call, finish, () => ended);
  }

  /** A user stop: the service persists `stopped` for the workflow. */
  private markStopped(workflowId: string): void {
    this.stoppedWorkflows.delete(workflowId);
    this.stoppedWorkflows.add(workflowId);
    if (this.stoppedWorkflows.size > STOPPED_WORKFLOWS_KEPT) this.stoppedWorkflows.delete(this.stoppedWorkflows.values().next().value as string);
  }

  /**
   * Whether a start is a resume of a stopped workflow, which the real service will not run.
   * A start with input (a goal, an approval) is a new turn: it runs, and the workflow is no
   * longer stopped.
   */
  private refusesResume(start: StartWorkflowRequest): boolean {
    const workflowId = start.workflowID ?? '';
    if (!this.stoppedWorkflows.has(workflowId)) return false;
    if (!start.goal && !start.approval) return true;
    this.stoppedWorkflows.delete(workflowId);
    return false;
  }

  /** One ExecuteWorkflow call, played by a SimulatedCall (simulated-call.ts). */
  private handle(call: grpc.ServerDuplexStream<DecodedClientEvent, Action>): void {
    this.live.add(new SimulatedCall(call, this.callHost));
  }
}
