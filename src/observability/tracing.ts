/**
 * The spans longrun makes (docs/spec.md §13), each kind started and ended here and nowhere
 * else, by hand — no auto-instrumentation, which would make every lease renewal and stop
 * poll a trace and a 55-minute stream one span. The tree of one detached execute:
 *
 *   caller's span (the dispatcher's traceparent; none: a new trace)
 *   ├── POST …/execute                     SERVER   the request, to its 202
 *   │   ├── owner preauth                  CLIENT   traceparent to the owner
 *   │   ├── lock acquire                   INTERNAL
 *   │   ├── workflow stream open           CLIENT   traceparent as gRPC metadata; ends once the start is written
 *   │   └── (event) accepted               first_action | accept_wait_elapsed
 *   └── workflow run                       INTERNAL the run's own life, linked to the execute it outlives
 *       ├── owner relay                    CLIENT   one per runHTTPRequest
 *       ├── mcp tool call                  CLIENT   one per runMCPTool served here
 *       ├── stop handshake                 INTERNAL the word sent, the outcome
 *       └── owner segment_end              CLIENT   the callback, all its attempts
 *
 * A blocking execute has no run span: its run's spans sit under the request's. Each
 * connection of a WebSocket session is a SERVER span; the run's span outlives it, a `websocket
 * parked` span covers each wait for the client, and the connection that re-attaches (on
 * this replica or, through the bridge, another) links to the run and the run to it. A
 * drain is one span, each run it stopped an event.
 *
 * Attributes name the workflow, the run, the transport, end reasons, gRPC codes and HTTP
 * statuses — never a token, a goal or a payload (a relayed path neither: it may carry
 * one). With tracing off every method returns TraceSpan.NONE and does nothing else.
 */
import type { IncomingHttpHeaders } from 'node:http';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  defaultTextMapGetter,
  defaultTextMapSetter,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator, parseTraceParent } from '@opentelemetry/core';
import { transportLabels, type EndReason, type Transport } from '../core/vocabulary';
import type { StopOutcome } from '../workflow/workflow-stream';

const propagator = new W3CTraceContextPropagator();

/** Where spans go when tracing is on (trace-export.ts): a bounded flush and a close. */
export interface TracePipeline {
  readonly tracer: Tracer;
  /** Sends what is queued, for at most `withinMs`; never rejects. */
  flush(withinMs: number): Promise<void>;
  /** Flushes (within `withinMs`), then ends the exporter and every connection it holds. Idempotent. */
  close(withinMs: number): Promise<void>;
}

/** A span as it travels between modules and replicas (a bridge claim): its W3C traceparent. */
export type TraceLink = string;

/** The W3C Trace Context headers a call carries: its span's traceparent, the caller's tracestate. */
export interface TraceHeaders {
  traceparent: string;
  tracestate?: string;
}

/** One span of longrun's, or NONE (tracing off). Started and ended by Tracing only. */
export class TraceSpan {
  static readonly NONE = new TraceSpan(undefined, ROOT_CONTEXT);
  private injected: TraceHeaders | undefined;

  constructor(
    /** The SDK span (undefined: tracing is off). */
    readonly span: Span | undefined,
    /** The context it was started in: for a request, the caller's (a detached run's span is started there too). */
    readonly parentContext: Context,
  ) {}

  /** Trace Context headers for a call this span makes; undefined when tracing is off. */
  get headers(): TraceHeaders | undefined {
    if (!this.span || this.injected) return this.injected;
    const carrier: Record<string, string> = {};
    propagator.inject(trace.setSpan(ROOT_CONTEXT, this.span), carrier, defaultTextMapSetter);
    const { traceparent, tracestate } = carrier;
    if (traceparent === undefined) return undefined;
    this.injected = tracestate ? { traceparent, tracestate } : { traceparent };
    return this.injected;
  }

  /** This span as a link another span (here or on another replica) can point to. */
  get link(): TraceLink | undefined {
    return this.headers?.traceparent;
  }

  /** `trace_id` and `span_id` for log lines; none when tracing is off. */
  get logFields(): { trace_id: string; span_id: string } | undefined {
    if (!this.span) return undefined;
    const { traceId, spanId } = this.span.spanContext();
    return { trace_id: traceId, span_id: spanId };
  }
}

/** The routes longrun serves with a SERVER span, and their names (method and route, the HTTP convention). */
export const routeNames = {
  execute: 'POST /api/v4/ai/duo_workflows/workflows/{workflow_id}/execute',
  websocket: 'GET /api/v4/ai/duo_workflows/ws',
  internal_stop: 'POST /internal/workflows/{workflow_id}/stop',
  internal_run: 'GET /internal/workflows/{workflow_id}/run',
} as const;
export type RequestRoute = keyof typeof routeNames;

/** The calls to the owner service, each a CLIENT span. */
export type OwnerCallKind = 'preauth' | 'relay' | 'segment_end';

/** What is known of a request's or WebSocket connection's run, said as it becomes known. */
export interface RunFacts {
  workflowId?: string | undefined;
  runId?: string | undefined;
  transport?: Transport | undefined;
}

/** How a request or WebSocket connection was answered. */
export interface RequestEnd extends RunFacts {
  status: number;
  /** The error code (errors.ts) or the owner's refusal (PREAUTH_DENIED). */
  errorCode?: string | undefined;
  /** A WebSocket connection: the close code the gateway sent, if it sent one. */
  closeCode?: number | undefined;
}

/** How a run ended, as its span records it. */
export interface RunEndFacts {
  reason: EndReason;
  grpcCode: number;
  stopOutcome: StopOutcome | undefined;
  actions: number;
  endedWhileStopping: boolean;
}

function runAttributes(facts: RunFacts): Attributes {
  const attributes: Attributes = {};
  if (facts.workflowId) attributes['longrun.workflow_id'] = facts.workflowId;
  if (facts.runId) attributes['longrun.run_id'] = facts.runId;
  if (facts.transport) attributes['longrun.transport'] = transportLabels[facts.transport];
  return attributes;
}

/** The run end reasons that are a failure of the run (the others are how runs end). */
const failedEnds: ReadonlySet<EndReason> = new Set(['stream_error', 'workflow_unavailable', 'lock_lost']);

function linkOf(link: TraceLink | undefined, attributes?: Attributes): Link | undefined {
  const context = link ? parseTraceParent(link) : null;
  return context ? { context, ...(attributes ? { attributes } : {}) } : undefined;
}

export class Tracing {
  /** Tracing off: no span, no header, no cost beyond a branch. */
  static readonly OFF = new Tracing(undefined);

  constructor(
    private readonly tracer: Tracer | undefined,
    /** Where the spans go; absent for a tracer the caller owns (a test's in-memory provider). */
    private readonly pipeline?: TracePipeline,
  ) {}

  get enabled(): boolean {
    return this.tracer !== undefined;
  }

  private start(name: string, kind: SpanKind, parent: Context, attributes?: Attributes, links?: Link[]): TraceSpan {
    const span = (this.tracer as Tracer).startSpan(name, { kind, ...(attributes ? { attributes } : {}), ...(links ? { links } : {}) }, parent);
    return new TraceSpan(span, parent);
  }

  private child(parent: TraceSpan, name: string, kind: SpanKind, attributes?: Attributes): TraceSpan {
    if (!this.tracer) return TraceSpan.NONE;
    return this.start(name, kind, parent.span ? trace.setSpan(parent.parentContext, parent.span) : ROOT_CONTEXT, attributes);
  }

  /**
   * A request or WebSocket connection (SERVER), child of the caller's `traceparent`/`tracestate` when
   * they are valid; an invalid or absent one starts a new trace, never an error.
   */
  request(route: RequestRoute, headers: IncomingHttpHeaders, correlationId: string, workflowId?: string): TraceSpan {
    if (!this.tracer) return TraceSpan.NONE;
    const caller = propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
    const [method, path] = routeNames[route].split(' ') as [string, string];
    return this.start(routeNames[route], SpanKind.SERVER, caller, {
      'http.request.method': method,
      'http.route': path,
      correlation_id: correlationId,
      ...runAttributes({ workflowId }),
    });
  }

  /** What became known of a request's run (its workflow, its run id, its transport). */
  note(span: TraceSpan, facts: RunFacts): void {
    span.span?.setAttributes(runAttributes(facts));
  }

  requestEnded(span: TraceSpan, end: RequestEnd): void {
    if (!span.span) return;
    span.span.setAttributes({ ...runAttributes(end), 'http.response.status_code': end.status });
    if (end.errorCode) span.span.setAttribute('error.type', end.errorCode);
    if (end.closeCode !== undefined) span.span.setAttribute('longrun.websocket.close_code', end.closeCode);
    if (end.status >= 500) span.span.setStatus({ code: SpanStatusCode.ERROR });
    span.span.end();
  }

  /** A detached run was accepted (docs/spec.md §3b): an event on its execute. */
  accepted(request: TraceSpan, on: string): void {
    request.span?.addEvent('accepted', { 'longrun.accepted_on': on });
  }

  /** A call to the owner service (CLIENT): its headers carry this span's traceparent. */
  ownerCall(parent: TraceSpan, call: OwnerCallKind, method: string): TraceSpan {
    return this.child(parent, `owner ${call}`, SpanKind.CLIENT, { 'http.request.method': method });
  }

  /** The owner's answer (`status`), or why there was none (`error`: timeout, network, aborted, …). */
  ownerCallEnded(span: TraceSpan, status: number | undefined, error?: string, attributes?: Attributes): void {
    if (!span.span) return;
    if (status !== undefined) span.span.setAttribute('http.response.status_code', status);
    if (error) span.span.setAttribute('error.type', error);
    if (attributes) span.span.setAttributes(attributes);
    if (error || (status !== undefined && status >= 400)) span.span.setStatus({ code: SpanStatusCode.ERROR });
    span.span.end();
  }

  /** Taking the workflow's lock (and the actor's slot). */
  lock(parent: TraceSpan): TraceSpan {
    return this.child(parent, 'lock acquire', SpanKind.INTERNAL);
  }

  /** `ok`, `unlocked` (a blocking run going on without the store), or the refusal's error code. */
  lockEnded(span: TraceSpan, result: string): void {
    if (!span.span) return;
    span.span.setAttribute('longrun.lock.result', result);
    if (result !== 'ok' && result !== 'unlocked') span.span.setStatus({ code: SpanStatusCode.ERROR });
    span.span.end();
  }

  /** Opening the ExecuteWorkflow call and writing its startRequest (CLIENT): its traceparent goes as gRPC metadata. */
  streamOpen(parent: TraceSpan): TraceSpan {
    return this.child(parent, 'workflow stream open', SpanKind.CLIENT, { 'rpc.system': 'grpc', 'rpc.service': 'DuoWorkflow', 'rpc.method': 'ExecuteWorkflow' });
  }

  /** `written` (the start is on an open HTTP/2 stream), or why not (`timeout`, `ended`, `unreachable`, `client_gone`). */
  streamOpened(span: TraceSpan, outcome: string): void {
    if (!span.span) return;
    span.span.setAttribute('longrun.stream.outcome', outcome);
    if (outcome !== 'written') span.span.setStatus({ code: SpanStatusCode.ERROR });
    span.span.end();
  }

  /**
   * A detached or WebSocket run's own life: started where its request was (under the
   * caller's span), linked to the request, which it outlives.
   */
  run(request: TraceSpan, facts: RunFacts): TraceSpan {
    if (!this.tracer) return TraceSpan.NONE;
    const link = request.span ? [{ context: request.span.spanContext(), attributes: { 'longrun.link': 'started_by' } }] : undefined;
    return this.start('workflow run', SpanKind.INTERNAL, request.parentContext, runAttributes(facts), link);
  }

  runEnded(span: TraceSpan, end: RunEndFacts): void {
    if (!span.span) return;
    span.span.setAttributes({
      'longrun.end_reason': end.reason,
      'rpc.grpc.status_code': end.grpcCode,
      'longrun.actions': end.actions,
      ...(end.stopOutcome ? { 'longrun.stop.outcome': end.stopOutcome } : {}),
      ...(end.endedWhileStopping ? { 'longrun.ended_while_stopping': true } : {}),
    });
    if (failedEnds.has(end.reason)) span.span.setStatus({ code: SpanStatusCode.ERROR });
    span.span.end();
  }

  /** A runMCPTool call on one of the owner's configured servers (CLIENT). */
  mcpCall(parent: TraceSpan, tool: string, serverKind: string): TraceSpan {
    return this.child(parent, 'mcp tool call', SpanKind.CLIENT, { 'longrun.mcp.tool': tool, 'longrun.mcp.server_kind': serverKind });
  }

  mcpCallEnded(span: TraceSpan, result: string): void {
    if (!span.span) return;
    span.span.setAttribute('longrun.mcp.result', result);
    if (result !== 'ok' && result !== 'tool_error') span.span.setStatus({ code: SpanStatusCode.ERROR });
    span.span.end();
  }

  /** The stop handshake (docs/spec.md §4): `word` is the StopWorkflowRequest.reason sent. */
  stopHandshake(parent: TraceSpan, word: string, reason: EndReason): TraceSpan {
    return this.child(parent, 'stop handshake', SpanKind.INTERNAL, { 'longrun.stop.reason': word, 'longrun.stop.cause': reason });
  }

  /** How it ended: its outcome, or `crossed` when the service's own end overtook it. */
  stopHandshakeEnded(span: TraceSpan, outcome: StopOutcome | 'crossed', grpcCode: number): void {
    if (!span.span) return;
    span.span.setAttributes({ 'longrun.stop.outcome': outcome, 'rpc.grpc.status_code': grpcCode });
    if (outcome === 'timeout' || outcome === 'error') span.span.setStatus({ code: SpanStatusCode.ERROR });
    span.span.end();
  }

  /** A WebSocket run waiting for its client (docs/spec.md §12), from the loss. */
  parked(run: TraceSpan): TraceSpan {
    return this.child(run, 'websocket parked', SpanKind.INTERNAL);
  }

  /**
   * The wait ended: `reattached` by the connection `by` (here or on `socketReplica`, both
   * linked both ways: the run's span gets the link and an event), or longrun gave the run
   * up (`expired`, `backlog_full`, `taken_over`), or the run ended (its reason).
   */
  parkEnded(park: TraceSpan, run: TraceSpan, outcome: string, by?: TraceLink, socketReplica?: string): void {
    if (!park.span) return;
    park.span.setAttribute('longrun.park.outcome', outcome);
    if (outcome === 'reattached') {
      const how = socketReplica === undefined ? 'local' : 'bridged';
      const attributes: Attributes = { 'longrun.reattach.how': how, ...(socketReplica ? { 'longrun.socket_replica': socketReplica } : {}) };
      const link = linkOf(by, { 'longrun.link': 'reattached_by' });
      if (link) {
        park.span.addLink(link);
        run.span?.addLink(link);
      }
      run.span?.addEvent('reattached', attributes);
      park.span.setAttributes(attributes);
    }
    park.span.end();
  }

  /** A connection's span that took a run over (a re-attach): linked to the run's span, wherever that lives. */
  linkToRun(connection: TraceSpan, run: TraceLink | undefined): void {
    const link = linkOf(run, { 'longrun.link': 'reattached_to' });
    if (connection.span && link) connection.span.addLink(link);
  }

  /** A drain (SIGTERM): one span, a root; each run it stopped an event. */
  drain(runs: number): TraceSpan {
    if (!this.tracer) return TraceSpan.NONE;
    return this.start('drain', SpanKind.INTERNAL, ROOT_CONTEXT, { 'longrun.drain.runs': runs });
  }

  /** One run the drain stopped, and how it ended. */
  drainStopped(drain: TraceSpan, facts: RunFacts, reason: string): void {
    drain.span?.addEvent('run stopped', { ...runAttributes(facts), 'longrun.end_reason': reason });
  }

  drainEnded(drain: TraceSpan, outcome: string, runsLeft: number): void {
    if (!drain.span) return;
    drain.span.setAttributes({ 'longrun.drain.outcome': outcome, 'longrun.drain.runs_left': runsLeft });
    if (outcome !== 'done') drain.span.setStatus({ code: SpanStatusCode.ERROR });
    drain.span.end();
  }

  /** Sends the spans queued, for at most `withinMs` (the drain gives it at most a second). */
  flush(withinMs: number): Promise<void> {
    return this.pipeline ? this.pipeline.flush(withinMs) : Promise.resolve();
  }

  /** Flushes within `withinMs`, then closes the exporter. Idempotent. */
  close(withinMs: number): Promise<void> {
    return this.pipeline ? this.pipeline.close(withinMs) : Promise.resolve();
  }
}
