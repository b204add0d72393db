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
import { isDeepStrictEqual } from 'node:util';
import { RECORD_LIMIT, record as keep, remember } from './recorded';
import { waitForChange } from './wait-for';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import {
  actionKinds,
  duoWorkflowService,
  messageTypes,
  type Action,
  type ActionResponse,
  type Approved,
  type DecodedClientEvent,
  type StartWorkflowRequest,
  type TokenBreakdown,
} from '../src/workflow/contract';
import { H2Front, type PingPolicy } from './h2-front';
import protobuf from 'protobufjs';
import { decodeProtoJson, fieldJsonName, ProtoJsonError } from '../src/workflow/protojson';
import { everyActionPayload } from './every-action';
import { parseScenario, type GrpcCodeName, type Step } from './scenario';

/**
 * The public service's infrastructure allowlist (ai-gateway
 * `duo_workflow_service/workflows/type_definitions.py` INFRA_STOP_REASONS): a stop with
 * one of these leaves the workflow `running`; every other word is a user stop, persisted
 * as `stopped`. Written here, not imported from the gateway: the simulator stands for
 * the service, whatever the gateway believes of it.
 */
export const defaultInfraStopReasons = ['WORKHORSE_SERVER_SHUTDOWN', 'WORKHORSE_WEBSOCKET_PING_FAILED'] as const;

/** The one word the service answers with UNAVAILABLE ("retry on another pod"); every other stop ends the call OK. */
const SHUTDOWN_WORD = 'WORKHORSE_SERVER_SHUTDOWN';

/** At most this many stopped workflows are remembered (the oldest forgotten first): a sandbox left running stays bounded. */
const STOPPED_WORKFLOWS_KEPT = 100_000;

export interface CallEnd {
  how: 'ok' | 'status' | 'cancelled';
  /** gRPC status name when how is 'status'. */
  code?: string;
  at: number;
}

/** One `paginate` step: the pages it fetched, in order, and how it stopped. */
export interface Pagination {
  path: string;
  pages: number[];
  /** Items read over every page (each page's body is a JSON array). */
  items: number;
  end: 'last_page' | 'max_pages' | 'error';
}

/** What the simulator saw of one ExecuteWorkflow call. */
export interface CallRecord {
  workflowId: string;
  startRequest: StartWorkflowRequest;
  /** Request metadata (headers) as received. */
  metadata: Record<string, string>;
  startedAt: number;
  actionsSent: number;
  actionResponses: Array<{ kind: string; requestID: string; response: ActionResponse }>;
  /** startRequests after the first: the real service reads and ignores them (a WebSocket client may send one). */
  laterStarts: StartWorkflowRequest[];
  /** The start request's approval decision, when it approves (approval_source, policy_ref and all). */
  approval?: Approved;
  /**
   * What failed the call as a client's protocol error (see `strict answers` in handle()):
   * an answer of the wrong type for its action (e.g. a plainTextResponse to a
   * scheduleNotification), an answer whose requestID names no pending action, an action
   * left unanswered past its step's answerWithinMs, or a `client` step's answer that is
   * not the one expected. The first one ends the call, so there is at most one.
   */
  protocolErrors: string[];
  stopReasons: string[];
  stopReceivedAt: number[];
  /**
   * Answers that arrived after a stop the service acted on, while it was ending the call
   * (`stopEndDelayMs`): the real service has cancelled the workflow by then, so they are
   * never read; their actions' outcomes are unknown to it.
   */
  answersAfterStop: string[];
  /**
   * Stops that arrived, with `endsCrossingStops`, as if just after the call had ended by
   * itself: the call ended OK and the stop was never acted on (not in stopReasons).
   */
  crossedStops: string[];
  /** Stops that arrived after the call had ended by itself (the end and the stop crossed on the wire). */
  lateStops: string[];
  heartbeats: number;
  paginations: Pagination[];
  /** A `turn` step: the steps done before this call (`from`) and after what it sent (`to`). */
  turn?: { key: string; from: number; to: number };
  /**
   * `track_llm_call` steps answered, in order; `billed`: this simulator's billing stream had
   * received the event (same requestID and workflowID, after the action was sent) when the
   * answer arrived, as Workhorse answers only once the billing stream acknowledged it.
   */
  llmCalls: Array<{ requestID: string; workflowID: string; billed: boolean }>;
  ended?: CallEnd;
}

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

/**
 * A scenario's steps stop with this when their call has ended. One instance, rejected
 * with and aborted with every time: an Error (or the DOMException abort() makes without a
 * reason) per ended call captured a stack trace each, a quarter of the simulator's CPU
 * when 5 000 calls end at once (the drain benchmark).
 */
class CallEnded extends Error {}
const CALL_ENDED = new CallEnded('the call has ended');
class BadScenario extends Error {}

type Finish = (how: CallEnd['how'], code?: keyof typeof grpc.status, message?: string) => void;

/**
 * How long a client half-close waits before the call is ended OK. A grpc-js client's
 * cancel() sends END_STREAM and then RST_STREAM, so the server sees 'end' a moment before
 * 'cancelled'; ending OK at once would record every cancel as a clean end. On a loaded
 * machine the two can be far apart; the gateway itself never half-closes a call, so a
 * generous grace costs nothing.
 */
const HALF_CLOSE_GRACE_MS = 500;

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
  /** Open calls, each with the function that ends it. */
  private readonly live = new Map<grpc.ServerDuplexStream<DecodedClientEvent, Action>, Finish>();
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
      for (const finish of [...this.live.values(), ...this.billingLive.values()]) finish('status', 'UNAVAILABLE', 'workflow service shutting down');
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

  private handle(call: grpc.ServerDuplexStream<DecodedClientEvent, Action>): void {
    let record: CallRecord | undefined;
    let ended = false;
    /** A stop was acted on; the call ends after stopEndDelayMs. */
    let stopping = false;
    /** This call's number among its workflow's calls (`{call}` in a turn's client action). */
    let callNumber = 0;
    let nextRequestId = 1;
    let clearGrace = (): void => undefined;
    const waiting = new Map<string, (response: ActionResponse) => void>();
    const abort = new AbortController();

    const finish: Finish = (how, code, message) => {
      if (ended) return;
      ended = true;
      clearGrace();
      abort.abort(CALL_ENDED);
      this.live.delete(call);
      if (record) record.ended = { how, code, at: Date.now() };
      if (how === 'ok') call.end();
      else if (how === 'status' && code) call.emit('error', { code: grpc.status[code], details: message ?? code });
      this.changed();
    };
    this.live.set(call, finish);

    // Like a real server awaiting its writes: while the client reads nothing, HTTP/2 flow
    // control fills the stream and the scenario waits here instead of buffering.
    const send = async (action: Action): Promise<void> => {
      if (ended || stopping) throw CALL_ENDED;
      if (record) record.actionsSent += 1;
      const room = call.write(action);
      this.changed();
      if (room) return;
      await new Promise<void>((resolve, reject) => {
        const onDrain = (): void => {
          abort.signal.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = (): void => {
          call.off('drain', onDrain);
          reject(CALL_ENDED);
        };
        call.once('drain', onDrain);
        abort.signal.addEventListener('abort', onAbort, { once: true });
      });
    };

    let checkpoints = 0;
    const checkpoint = (payload: Record<string, unknown>): Promise<void> => {
      checkpoints += 1;
      return send({ requestID: String(nextRequestId++), newCheckpoint: payload });
    };

    // Strict answers. Workhorse checks none of the answers it forwards (runner.go
    // handleClientEvent sends every client event on as it is), so the service is where a
    // wrong answer surfaces, and a simulator that only noted it would let a gateway bug
    // pass. Like the service, which cannot go on with an answer it cannot read, the
    // simulator ends the call: INVALID_ARGUMENT for an answer of the wrong type for its
    // action and for an answer whose requestID names no pending action (the client sent
    // something the service cannot accept: gRPC's code for a caller's malformed input),
    // DEADLINE_EXCEEDED for an action left unanswered past its step's answerWithinMs (the
    // service's own wait for it expired). The service's source is not at hand to confirm
    // its exact codes; these are the ones gRPC defines for the two cases. A Workhorse in
    // front turns the INVALID_ARGUMENT into WebSocket close 4400 carrying the status
    // message (stream_manager.go Recv, websocket.go SendInvalidRequest).
    const protocolError = (code: 'INVALID_ARGUMENT' | 'DEADLINE_EXCEEDED', message: string): never => {
      record?.protocolErrors.push(message);
      finish('status', code, message);
      throw CALL_ENDED;
    };

    const request = async (action: Omit<Action, 'requestID'>, kind: string, answerWithinMs?: number): Promise<{ requestID: string; response: ActionResponse }> => {
      const requestID = String(nextRequestId++);
      let giveUp: (() => void) | undefined;
      const answered = new Promise<ActionResponse | 'unanswered'>((resolve, reject) => {
        // One listener per pending request, removed when answered: a long scenario must
        // not pile listeners on the call's signal.
        const onAbort = (): void => reject(CALL_ENDED);
        abort.signal.addEventListener('abort', onAbort, { once: true });
        const settle = (response: ActionResponse | 'unanswered'): void => {
          abort.signal.removeEventListener('abort', onAbort);
          resolve(response);
        };
        waiting.set(requestID, settle);
        giveUp = () => {
          waiting.delete(requestID);
          settle('unanswered');
        };
      });
      await send({ requestID, ...action } as Action);
      // Counted from when the action was handed to the transport, as the service counts.
      const timer = answerWithinMs === undefined ? undefined : setTimeout(() => giveUp?.(), answerWithinMs);
      const response = await answered.finally(() => clearTimeout(timer));
      if (response === 'unanswered') return protocolError('DEADLINE_EXCEEDED', `${kind} #${requestID} unanswered after ${answerWithinMs} ms`);
      record?.actionResponses.push({ kind, requestID, response });
      this.changed();
      const expected = expectedResponseType(kind);
      if (response.response_type !== expected) {
        protocolError('INVALID_ARGUMENT', `${kind} #${requestID} answered with ${response.response_type ?? 'no response'}, expected ${expected}`);
      }
      return { requestID, response };
    };

    // A `client` (or `track_llm_call`) step's check of the answer's content.
    const check = (kind: string, requestID: string, response: ActionResponse, expect: Record<string, unknown> | undefined, exact: boolean | undefined): void => {
      if (expect === undefined) return;
      let expected: Record<string, unknown>;
      try {
        // protojson discards unknown fields; an expect that named one would match anything.
        const unknown = unknownField(messageTypes.ActionResponse, expect, '');
        if (unknown) throw new BadScenario(`expect names ${unknown}, no field of ActionResponse`);
        expected = canonicalAnswer(decodeProtoJson(messageTypes.ActionResponse, expect));
      } catch (err) {
        if (err instanceof ProtoJsonError) throw new BadScenario(`expect is not an ActionResponse: ${err.message}`);
        throw err;
      }
      const got = canonicalAnswer(response);
      if (exact ? isDeepStrictEqual(got, expected) : contains(got, expected)) return;
      record?.protocolErrors.push(`unexpected answer to ${kind} #${requestID}: ${JSON.stringify(got)}, expected ${exact ? '' : 'at least '}${JSON.stringify(expected)}`);
      finish('status', 'INVALID_ARGUMENT', `unexpected answer to ${kind} #${requestID}`);
      throw CALL_ENDED;
    };

    const runStep = async (step: Step): Promise<void> => {
      switch (step.op) {
        case 'checkpoint':
          await checkpoint({
            status: step.status ?? 'RUNNING',
            checkpoint: step.bytes === undefined ? (step.text ?? '') : (step.text ?? '').padEnd(step.bytes, 'x'),
            goal: record?.startRequest.goal ?? '',
            errors: step.errors ?? [],
            agent_context_usage: step.usage ?? defaultUsage(record?.startRequest, checkpoints + 1),
          });
          return;
        case 'http':
          await request(
            { runHTTPRequest: { method: step.method ?? 'GET', path: step.path, ...(step.body === undefined ? {} : { body: step.body }) } },
            'runHTTPRequest',
            step.answerWithinMs,
          );
          return;
        case 'mcp':
          await request({ runMCPTool: { name: step.name, args: step.args ?? '{}' } }, 'runMCPTool', step.answerWithinMs);
          return;
        case 'unsupported': {
          const kind = step.kind ?? 'runReadFile';
          await request({ [kind]: unsupportedPayload(kind) }, kind, step.answerWithinMs);
          return;
        }
        case 'action': {
          const { action, kind } = scenarioAction(step.action, 'an action step');
          if (kind === 'newCheckpoint') await send({ requestID: String(nextRequestId++), ...action });
          else await request(action, kind, step.answerWithinMs);
          return;
        }
        case 'client': {
          const { action, kind } = scenarioAction(step.action, 'a client step');
          if (kind === 'newCheckpoint') throw new BadScenario('a client step needs an action that is answered, not a newCheckpoint');
          const { requestID, response } = await request(action, kind, step.answerWithinMs);
          check(kind, requestID, response, step.expect, step.exact);
          return;
        }
        case 'track_llm_call': {
          // Answered as Workhorse answers it (stream_manager.go HandleCloudServiceTracking):
          // a plainTextResponse, once the billing stream acknowledged the event.
          const workflowID = step.workflowID ?? record?.workflowId ?? '';
          const sentAt = Date.now();
          const track = { workflowID, featureQualifiedName: step.featureQualifiedName ?? 'duo_chat', featureAiCatalogItem: step.featureAiCatalogItem ?? false };
          const { requestID, response } = await request({ trackLlmCallForSelfHosted: track }, 'trackLlmCallForSelfHosted', step.answerWithinMs);
          const billed = this.billingCalls.some((c) => c.events.some((e) => e.requestID === requestID && e.workflowID === workflowID && e.at >= sentAt));
          record?.llmCalls.push({ requestID, workflowID, billed });
          this.changed();
          check('trackLlmCallForSelfHosted', requestID, response, step.expect, step.exact);
          return;
        }
        case 'every_action':
          for (const kind of actionKinds) {
            const payload = everyActionPayload[kind];
            if (kind === 'newCheckpoint') await checkpoint({ ...payload });
            else await request({ [kind]: payload }, kind, step.answerWithinMs);
          }
          return;
        case 'wait':
          await sleep(step.ms, undefined, { signal: abort.signal }).catch(() => {
            throw CALL_ENDED;
          });
          return;
        case 'fail':
          finish('status', step.code, step.message);
          throw CALL_ENDED;
        case 'hang':
          await new Promise((_resolve, reject) => abort.signal.addEventListener('abort', () => reject(CALL_ENDED), { once: true }));
          return;
        case 'end':
          finish('ok');
          throw CALL_ENDED;
        case 'repeat':
          for (let i = 0; i < step.times; i++) for (const inner of step.steps) await runStep(inner);
          return;
        case 'paginate':
          await paginate(step);
          return;
        case 'turn':
          await turn(step);
          return;
      }
    };

    // Continues after the last checkpoint any earlier call of this workflow sent.
    const turn = async (step: Extract<Step, { op: 'turn' }>): Promise<void> => {
      const key = `${record?.workflowId ?? ''}/${step.id ?? 'turn'}`;
      const progress = { key, from: this.progress.get(key) ?? 0, to: 0 };
      progress.to = progress.from;
      if (record) record.turn = progress;
      for (let i = progress.from + 1; i <= step.checkpoints; i++) {
        if (step.intervalMs) await runStep({ op: 'wait', ms: step.intervalMs });
        // Held only after a step of this call: a call that starts at the last step does it at once, so a turn always ends.
        const held = step.finishAtMs !== undefined && i === step.checkpoints && i > progress.from + 1;
        const finishIn = held ? (step.finishAtMs as number) - (Date.now() - (record?.startedAt ?? 0)) : 0;
        if (finishIn > 0) await runStep({ op: 'wait', ms: Math.ceil(finishIn) });
        if (step.write) {
          await request(
            { runHTTPRequest: { method: step.write.method ?? 'POST', path: step.write.path, body: JSON.stringify({ step: i }) } },
            'runHTTPRequest',
            step.answerWithinMs,
          );
        }
        if (step.client) {
          const { action, kind } = scenarioAction(forStep(step.client.action, i, callNumber), "a turn's client action");
          if (kind === 'newCheckpoint') throw new BadScenario("a turn's client action needs an action that is answered, not a newCheckpoint");
          const { requestID, response } = await request(action, kind, step.answerWithinMs);
          check(kind, requestID, response, step.client.expect && forStep(step.client.expect, i, callNumber), step.client.exact);
        }
        // A checkpoint written is a checkpoint kept, even if the call ends before the client reads it.
        if (ended) throw CALL_ENDED;
        remember(this.progress, key, i, this.recordLimit);
        progress.to = i;
        await send({
          requestID: String(nextRequestId++),
          newCheckpoint: { status: i === step.checkpoints ? 'FINISHED' : 'RUNNING', checkpoint: `step ${i}/${step.checkpoints}`, goal: record?.startRequest.goal ?? '' },
        });
      }
    };

    // As the real service reads a paginated GitLab API: X-Next-Page, by its exact name.
    const paginate = async (step: Extract<Step, { op: 'paginate' }>): Promise<void> => {
      const pagination: Pagination = { path: step.path, pages: [], items: 0, end: 'last_page' };
      record?.paginations.push(pagination);
      const perPage = step.perPage ?? 20;
      const separator = step.path.includes('?') ? '&' : '?';
      let page = 1;
      for (;;) {
        pagination.pages.push(page);
        const { response } = await request(
          { runHTTPRequest: { method: 'GET', path: `${step.path}${separator}page=${page}&per_page=${perPage}` } },
          'runHTTPRequest',
          step.answerWithinMs,
        );
        const http = response.httpResponse;
        if (!http || http.error || (http.statusCode ?? 0) >= 400) {
          pagination.end = 'error';
          return;
        }
        pagination.items += countItems(http.body);
        const next = Number(http.headers?.['X-Next-Page'] || NaN);
        if (!Number.isInteger(next) || next <= page) return;
        if (pagination.pages.length >= (step.maxPages ?? 100)) {
          pagination.end = 'max_pages';
          return;
        }
        page = next;
      }
    };

    const play = async (steps: Step[]): Promise<void> => {
      try {
        for (const step of steps) await runStep(step);
        finish('ok');
      } catch (err) {
        if (err instanceof BadScenario || err instanceof ProtoJsonError) finish('status', 'INVALID_ARGUMENT', `bad scenario: ${err.message}`);
        else if (!(err instanceof CallEnded)) finish('status', 'INTERNAL', String(err));
      }
    };

    call.on('data', (event: DecodedClientEvent) => {
      if (ended) {
        if (event.stopWorkflow && record) {
          record.lateStops.push(event.stopWorkflow.reason ?? '');
          this.changed();
        }
        return;
      }
      if (!record) {
        if (!event.startRequest) {
          finish('status', 'INVALID_ARGUMENT', 'first event must be startRequest');
          return;
        }
        const metadata: Record<string, string> = {};
        for (const [k, v] of Object.entries(call.metadata.getMap())) metadata[k] = String(v);
        record = {
          workflowId: event.startRequest.workflowID ?? '',
          startRequest: event.startRequest,
          metadata,
          startedAt: Date.now(),
          actionsSent: 0,
          actionResponses: [],
          ...(event.startRequest.approval?.approval ? { approval: event.startRequest.approval.approval } : {}),
          laterStarts: [],
          protocolErrors: [],
          answersAfterStop: [],
          stopReasons: [],
          stopReceivedAt: [],
          crossedStops: [],
          lateStops: [],
          heartbeats: 0,
          paginations: [],
          llmCalls: [],
        };
        keep(this.calls, record, this.recordLimit);
        callNumber = this.callsFor(record.workflowId).length;
        this.changed();
        if (this.refusesResume(event.startRequest)) {
          finish('status', 'INVALID_ARGUMENT', `workflow ${record.workflowId} is stopped: it cannot be resumed`);
          return;
        }
        let steps: Step[];
        try {
          steps = parseScenario(event.startRequest.workflowMetadata);
        } catch (err) {
          finish('status', 'INVALID_ARGUMENT', (err as Error).message);
          return;
        }
        void play(steps);
        return;
      }
      if (stopping) {
        if (event.actionResponse) record.answersAfterStop.push(event.actionResponse.requestID ?? '');
        this.changed();
        return;
      }
      if (event.actionResponse) {
        const requestID = event.actionResponse.requestID ?? '';
        const resolve = waiting.get(requestID);
        if (!resolve) {
          // No pending action by that id: never sent, answered already, given up on, or a
          // checkpoint (which takes no answer). See `strict answers` above.
          const message = `actionResponse #${requestID} names no pending action`;
          record.protocolErrors.push(message);
          finish('status', 'INVALID_ARGUMENT', message);
          return;
        }
        waiting.delete(requestID);
        resolve(event.actionResponse);
      } else if (event.stopWorkflow) {
        const reason = event.stopWorkflow.reason ?? '';
        if (this.endsCrossingStops) {
          record.crossedStops.push(reason);
          finish('ok');
          return;
        }
        record.stopReasons.push(reason);
        record.stopReceivedAt.push(Date.now());
        this.changed();
        if (this.ignoreStops) return;
        if (!this.infraStopReasons.has(reason)) this.markStopped(record.workflowId);
        const end = (): void => {
          if (reason === SHUTDOWN_WORD) finish('status', 'UNAVAILABLE', 'workflow execution interrupted: running');
          else finish('ok');
        };
        if (this.stopEndDelayMs <= 0) return end();
        // The workflow is cancelled now; the call ends once that is done.
        stopping = true;
        abort.abort(CALL_ENDED);
        setTimeout(end, this.stopEndDelayMs).unref();
      } else if (event.heartbeat) {
        record.heartbeats += 1;
        this.changed();
      } else if (event.startRequest) {
        record.laterStarts.push(event.startRequest);
        this.changed();
      }
    });
    clearGrace = followClientEnd(call, finish, () => ended);
  }
}

/**
 * `json` with every "{step}" in its strings (at any depth) replaced by `step`, and every
 * "{call}" by the call's number among its workflow's calls (1, 2, …): a turn's action for
 * one step of one call.
 */
function forStep(json: Record<string, unknown>, step: number, call: number): Record<string, unknown> {
  const replace = (value: unknown): unknown => {
    if (typeof value === 'string') return value.replaceAll('{step}', String(step)).replaceAll('{call}', String(call));
    if (Array.isArray(value)) return value.map(replace);
    if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replace(v)]));
    return value;
  };
  return replace(json) as Record<string, unknown>;
}

/** A scenario's protojson Action, numbered by the simulator (its requestID dropped), and its kind. */
function scenarioAction(json: Record<string, unknown>, what: string): { action: Action; kind: (typeof actionKinds)[number] } {
  const action = decodeProtoJson(messageTypes.Action, json) as Action;
  delete action.requestID; // the simulator numbers its own requests
  const kind = actionKinds.find((k) => action[k] !== undefined);
  if (!kind) throw new BadScenario(`${what} names no action kind`);
  return { action, kind };
}

/**
 * An ActionResponse as the wire carries it, without its requestID: proto names, no
 * presence or oneof markers, and proto3 zero values absent (an empty string, 0, false,
 * an empty list or map is the same message as none), whether it came from proto-loader
 * or from a scenario's protojson.
 */
function canonicalAnswer(response: Record<string, unknown> | ActionResponse): Record<string, unknown> {
  const type = messageTypes.ActionResponse;
  const plain = type.toObject(type.fromObject({ ...response, requestID: '' }), { longs: String, enums: String, defaults: false });
  return withoutZeros(type, plain);
}

function withoutZeros(type: protobuf.Type, message: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(message)) {
    const field = type.fields[key];
    if (!field) continue;
    field.resolve();
    const nested = field.resolvedType instanceof protobuf.Type ? field.resolvedType : undefined;
    const hasPresence = nested !== undefined || field.options?.['proto3_optional'] === true || (field.partOf !== null && field.partOf !== undefined);
    if (field.map) {
      const entries = Object.entries(value as Record<string, unknown>);
      if (entries.length > 0) out[key] = Object.fromEntries(entries.map(([k, v]) => [k, nested ? withoutZeros(nested, v as Record<string, unknown>) : v]));
    } else if (field.repeated) {
      const items = value as unknown[];
      if (items.length > 0) out[key] = nested ? items.map((v) => withoutZeros(nested, v as Record<string, unknown>)) : items;
    } else if (nested) {
      out[key] = withoutZeros(nested, value as Record<string, unknown>);
    } else if (hasPresence || !isZero(field, value)) {
      out[key] = value;
    }
  }
  return out;
}

function isZero(field: protobuf.Field, value: unknown): boolean {
  if (field.resolvedType instanceof protobuf.Enum) return field.resolvedType.values[String(value)] === 0 || value === 0;
  if (field.type === 'string' || field.type === 'bytes') return value === '' || (typeof value === 'object' && value !== null && (value as { length?: number }).length === 0);
  if (field.type === 'bool') return value === false;
  return value === 0 || value === '0';
}

/** The path of the first key of `json` that is no field of `type` (by proto or JSON name), looked for in nested messages too. */
function unknownField(type: protobuf.Type, json: unknown, path: string): string | undefined {
  if (typeof json !== 'object' || json === null || Array.isArray(json) || type.fullName.startsWith('.google.protobuf.')) return undefined;
  for (const [key, value] of Object.entries(json)) {
    const field = type.fieldsArray.find((f) => f.name === key || fieldJsonName(f) === key);
    const at = path ? `${path}.${key}` : key;
    if (!field) return at;
    field.resolve();
    if (!(field.resolvedType instanceof protobuf.Type) || value === null) continue;
    const nested = field.map ? Object.values(value as object) : field.repeated && Array.isArray(value) ? value : [value];
    for (const item of nested) {
      const found = unknownField(field.resolvedType, item, at);
      if (found) return found;
    }
  }
  return undefined;
}

/** Whether `got` has every field of `want` with its value: objects field by field, everything else (arrays too) whole. */
function contains(got: unknown, want: unknown): boolean {
  if (typeof want !== 'object' || want === null || Array.isArray(want)) return isDeepStrictEqual(got, want);
  if (typeof got !== 'object' || got === null || Array.isArray(got)) return false;
  const have = got as Record<string, unknown>;
  return Object.entries(want).every(([k, v]) => k in have && contains(have[k], v));
}

/**
 * Ends a call as its client ends it: a cancel or an error at once, a half-close after
 * HALF_CLOSE_GRACE_MS (see there). Returns what clears that grace timer (the call ended first).
 */
function followClientEnd<Req, Res>(call: grpc.ServerDuplexStream<Req, Res>, finish: (how: 'ok' | 'cancelled') => void, ended: () => boolean): () => void {
  let grace: NodeJS.Timeout | undefined;
  call.on('cancelled', () => finish('cancelled'));
  call.on('end', () => {
    if (ended()) return;
    grace = setTimeout(() => finish(call.cancelled ? 'cancelled' : 'ok'), HALF_CLOSE_GRACE_MS);
  });
  call.on('error', () => finish('cancelled'));
  return () => clearTimeout(grace);
}

function countItems(body: string | undefined): number {
  try {
    const parsed: unknown = JSON.parse(body ?? '');
    return Array.isArray(parsed) ? parsed.length : 0;
  } catch {
    return 0;
  }
}

/** The answer type the real service reads for an action of `kind` (docs/spec.md §4). */
function expectedResponseType(kind: string): NonNullable<ActionResponse['response_type']> {
  if (kind === 'runHTTPRequest') return 'httpResponse';
  if (kind === 'scheduleNotification') return 'scheduleNotificationResponse';
  return 'plainTextResponse';
}

/** What the service reports by default: one agent, named after the flow, 1 000 tokens per checkpoint. */
function defaultUsage(start: StartWorkflowRequest | undefined, n: number): Record<string, TokenBreakdown> {
  return { [start?.workflowDefinition || 'chat']: { total_tokens: 1_000 * n, max_tokens: 200_000 } };
}

function unsupportedPayload(kind: string): Record<string, unknown> {
  switch (kind) {
    case 'runCommand':
      return { program: 'ls' };
    case 'runGitCommand':
      return { command: 'status' };
    case 'runShellCommand':
      return { command: 'ls' };
    case 'listDirectory':
      return { directory: '.' };
    default:
      return {};
  }
}
