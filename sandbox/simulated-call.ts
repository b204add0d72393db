/**
 * One ExecuteWorkflow call to the simulated workflow service, as the real service runs it:
 * its first event must be the startRequest, whose workflowMetadata names the scenario
 * (scenario.ts) the call plays, one step after another; the client's answers are read
 * strictly (answers.ts), a stopWorkflow is answered as the real service answers it
 * (ai-gateway `server.py`: UNAVAILABLE for WORKHORSE_SERVER_SHUTDOWN, OK for every other
 * word), and everything seen is recorded in the call's CallRecord for assertions. What
 * outlives a call (the calls recorded, the workflows stopped, the turns' progress, the
 * billing stream) is the service's: the call reaches it through CallHost.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import type { Approved } from '@longrun/client';
import { actionKinds, messageTypes, type Action, type ActionResponse, type DecodedClientEvent, type StartWorkflowRequest, type TokenBreakdown } from '../src/workflow/contract';
import { decodeProtoJson, ProtoJsonError } from '../src/workflow/protojson';
import { answerMismatch, expectedResponseType } from './answers';
import { everyActionPayload } from './every-action';
import { BadScenario, parseScenario, type Step } from './scenario';

/** The one word the service answers with UNAVAILABLE ("retry on another pod"); every other stop ends the call OK. */
const SHUTDOWN_WORD = 'WORKHORSE_SERVER_SHUTDOWN';

/**
 * How long a client half-close waits before the call is ended OK. A grpc-js client's
 * cancel() sends END_STREAM and then RST_STREAM, so the server sees 'end' a moment before
 * 'cancelled'; ending OK at once would record every cancel as a clean end. On a loaded
 * machine the two can be far apart; the gateway itself never half-closes a call, so a
 * generous grace costs nothing.
 */
const HALF_CLOSE_GRACE_MS = 500;

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
   * What failed the call as a client's protocol error (see SimulatedCall.request and answers.ts):
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

/**
 * A scenario's steps stop with this when their call has ended. One instance, rejected
 * with and aborted with every time: an Error (or the DOMException abort() makes without a
 * reason) per ended call captured a stack trace each, a quarter of the simulator's CPU
 * when 5 000 calls end at once (the drain benchmark).
 */
class CallEnded extends Error {}
const CALL_ENDED = new CallEnded('the call has ended');

export type Finish = (how: CallEnd['how'], code?: keyof typeof grpc.status, message?: string) => void;

/** What a call reads and changes of the service it runs in (workflow-sim.ts). */
export interface CallHost {
  /** How a stop is taken (ignoreStops, endsCrossingStops, stopEndDelayMs in WorkflowSimulatorOptions), read at each stop: a test may switch it while calls are open. */
  stopHandling(): { ignore: boolean; endsCrossing: boolean; endDelayMs: number };
  /** Records a call that has read its start; returns its number among its workflow's calls (1, 2, …). */
  opened(record: CallRecord): number;
  /** The call has ended (its record says how). */
  closed(call: SimulatedCall): void;
  /** Something recorded changed (what waitFor re-checks on). */
  changed(): void;
  /** Whether the service refuses this start: a resume of a workflow a user stop marked stopped. */
  refusesResume(start: StartWorkflowRequest): boolean;
  /** A stop with `reason` was acted on (a word off the allowlist marks the workflow stopped). */
  stopped(workflowId: string, reason: string): void;
  /** The steps of a turn done so far (by `<workflow id>/<turn id>`), and one more done. */
  turnProgress(key: string): number;
  turnStepDone(key: string, step: number): void;
  /** Whether the billing stream received the event of this action (its requestID and workflow) since `since`. */
  billed(requestID: string, workflowID: string, since: number): boolean;
}

export class SimulatedCall {
  /** What was seen of the call; set by its startRequest. */
  private record: CallRecord | undefined;
  private ended = false;
  /** A stop was acted on; the call ends after stopEndDelayMs. */
  private stopping = false;
  /** This call's number among its workflow's calls (`{call}` in a turn's client action). */
  private callNumber = 0;
  private nextRequestId = 1;
  private checkpoints = 0;
  /** Actions sent and not answered yet, by requestID. */
  private readonly waiting = new Map<string, (response: ActionResponse) => void>();
  /** Aborted when the call ends (or acts on a stop): every step waiting on it gives up. */
  private readonly abort = new AbortController();
  private readonly clearGrace: () => void;

  constructor(
    private readonly call: grpc.ServerDuplexStream<DecodedClientEvent, Action>,
    private readonly host: CallHost,
  ) {
    call.on('data', (event: DecodedClientEvent) => this.receive(event));
    this.clearGrace = followClientEnd(
      call,
      (how) => this.finish(how),
      () => this.ended,
    );
  }

  /** Ends the call: OK, with a status, or as cancelled by its client. Idempotent. */
  readonly finish: Finish = (how, code, message) => {
    if (this.ended) return;
    this.ended = true;
    this.clearGrace();
    this.abort.abort(CALL_ENDED);
    this.host.closed(this);
    if (this.record) this.record.ended = { how, code, at: Date.now() };
    if (how === 'ok') this.call.end();
    else if (how === 'status' && code) this.call.emit('error', { code: grpc.status[code], details: message ?? code });
    this.host.changed();
  };

  private receive(event: DecodedClientEvent): void {
    const record = this.record;
    if (this.ended) {
      if (event.stopWorkflow && record) {
        record.lateStops.push(event.stopWorkflow.reason ?? '');
        this.host.changed();
      }
      return;
    }
    if (!record) return this.start(event);
    if (this.stopping) {
      if (event.actionResponse) record.answersAfterStop.push(event.actionResponse.requestID ?? '');
      this.host.changed();
      return;
    }
    if (event.actionResponse) {
      this.answered(record, event.actionResponse);
    } else if (event.stopWorkflow) {
      this.stop(record, event.stopWorkflow.reason ?? '');
    } else if (event.heartbeat) {
      record.heartbeats += 1;
      this.host.changed();
    } else if (event.startRequest) {
      record.laterStarts.push(event.startRequest);
      this.host.changed();
    }
  }

  /** The call's first event: it must be the startRequest, whose scenario the call plays. */
  private start(event: DecodedClientEvent): void {
    if (!event.startRequest) return this.finish('status', 'INVALID_ARGUMENT', 'first event must be startRequest');
    const metadata: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.call.metadata.getMap())) metadata[k] = String(v);
    const record: CallRecord = {
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
    this.record = record;
    this.callNumber = this.host.opened(record);
    this.host.changed();
    if (this.host.refusesResume(event.startRequest)) return this.finish('status', 'INVALID_ARGUMENT', `workflow ${record.workflowId} is stopped: it cannot be resumed`);
    let steps: Step[];
    try {
      steps = parseScenario(event.startRequest.workflowMetadata);
    } catch (err) {
      return this.finish('status', 'INVALID_ARGUMENT', (err as Error).message);
    }
    void this.play(steps);
  }

  private answered(record: CallRecord, response: ActionResponse): void {
    const requestID = response.requestID ?? '';
    const resolve = this.waiting.get(requestID);
    if (!resolve) {
      // No pending action by that id: never sent, answered already, given up on, or a
      // checkpoint (which takes no answer). The service cannot go on with it.
      const message = `actionResponse #${requestID} names no pending action`;
      record.protocolErrors.push(message);
      return this.finish('status', 'INVALID_ARGUMENT', message);
    }
    this.waiting.delete(requestID);
    resolve(response);
  }

  /** A stopWorkflow: the workflow is cancelled, and the call ends as the real service ends it. */
  private stop(record: CallRecord, reason: string): void {
    const handling = this.host.stopHandling();
    if (handling.endsCrossing) {
      record.crossedStops.push(reason);
      return this.finish('ok');
    }
    record.stopReasons.push(reason);
    record.stopReceivedAt.push(Date.now());
    this.host.changed();
    if (handling.ignore) return;
    this.host.stopped(record.workflowId, reason);
    const end = (): void => {
      if (reason === SHUTDOWN_WORD) this.finish('status', 'UNAVAILABLE', 'workflow execution interrupted: running');
      else this.finish('ok');
    };
    if (handling.endDelayMs <= 0) return end();
    // The workflow is cancelled now; the call ends once that is done.
    this.stopping = true;
    this.abort.abort(CALL_ENDED);
    setTimeout(end, handling.endDelayMs).unref();
  }

  private async play(steps: Step[]): Promise<void> {
    try {
      for (const step of steps) await this.step(step);
      this.finish('ok');
    } catch (err) {
      if (err instanceof BadScenario || err instanceof ProtoJsonError) this.finish('status', 'INVALID_ARGUMENT', `bad scenario: ${err.message}`);
      else if (!(err instanceof CallEnded)) this.finish('status', 'INTERNAL', String(err));
    }
  }

  private async step(step: Step): Promise<void> {
    switch (step.op) {
      case 'checkpoint':
        await this.checkpoint({
          status: step.status ?? 'RUNNING',
          checkpoint: `${step.bytes === undefined ? (step.text ?? '') : (step.text ?? '').padEnd(step.bytes, 'x')}${step.stamp ? `@${(performance.timeOrigin + performance.now()).toFixed(3)}` : ''}`,
          goal: this.record?.startRequest.goal ?? '',
          errors: step.errors ?? [],
          agent_context_usage: step.usage ?? defaultUsage(this.record?.startRequest, this.checkpoints + 1),
        });
        return;
      case 'http':
        await this.request(
          { runHTTPRequest: { method: step.method ?? 'GET', path: step.path, ...(step.body === undefined ? {} : { body: step.body }) } },
          'runHTTPRequest',
          step.answerWithinMs,
        );
        return;
      case 'mcp':
        await this.request({ runMCPTool: { name: step.name, args: step.args ?? '{}' } }, 'runMCPTool', step.answerWithinMs);
        return;
      case 'unsupported': {
        const kind = step.kind ?? 'runReadFile';
        await this.request({ [kind]: unsupportedPayload(kind) }, kind, step.answerWithinMs);
        return;
      }
      case 'action': {
        const { action, kind } = scenarioAction(step.action, 'an action step');
        if (kind === 'newCheckpoint') await this.send({ requestID: String(this.nextRequestId++), ...action });
        else await this.request(action, kind, step.answerWithinMs);
        return;
      }
      case 'client': {
        const { action, kind } = scenarioAction(step.action, 'a client step');
        if (kind === 'newCheckpoint') throw new BadScenario('a client step needs an action that is answered, not a newCheckpoint');
        const { requestID, response } = await this.request(action, kind, step.answerWithinMs);
        this.check(kind, requestID, response, step.expect, step.exact);
        return;
      }
      case 'track_llm_call':
        await this.trackLlmCall(step);
        return;
      case 'every_action':
        for (const kind of actionKinds) {
          const payload = everyActionPayload[kind];
          if (kind === 'newCheckpoint') await this.checkpoint({ ...payload });
          else await this.request({ [kind]: payload }, kind, step.answerWithinMs);
        }
        return;
      case 'wait':
        await sleep(step.ms, undefined, { signal: this.abort.signal }).catch(() => {
          throw CALL_ENDED;
        });
        return;
      case 'fail':
        this.finish('status', step.code, step.message);
        throw CALL_ENDED;
      case 'hang':
        await new Promise((_resolve, reject) => this.abort.signal.addEventListener('abort', () => reject(CALL_ENDED), { once: true }));
        return;
      case 'end':
        this.finish('ok');
        throw CALL_ENDED;
      case 'repeat':
        for (let i = 0; i < step.times; i++) for (const inner of step.steps) await this.step(inner);
        return;
      case 'paginate':
        await this.paginate(step);
        return;
      case 'turn':
        await this.turn(step);
        return;
    }
  }

  /**
   * Writes an action, like a real server awaiting its writes: while the client reads
   * nothing, HTTP/2 flow control fills the stream and the scenario waits here instead of
   * buffering.
   */
  private async send(action: Action): Promise<void> {
    if (this.ended || this.stopping) throw CALL_ENDED;
    if (this.record) this.record.actionsSent += 1;
    const room = this.call.write(action);
    this.host.changed();
    if (room) return;
    const signal = this.abort.signal;
    await new Promise<void>((resolve, reject) => {
      const onDrain = (): void => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = (): void => {
        this.call.off('drain', onDrain);
        reject(CALL_ENDED);
      };
      this.call.once('drain', onDrain);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  private checkpoint(payload: Record<string, unknown>): Promise<void> {
    this.checkpoints += 1;
    return this.send({ requestID: String(this.nextRequestId++), newCheckpoint: payload });
  }

  /**
   * Sends an action that takes an answer and waits for it. Like the service, which cannot
   * go on with an answer it cannot read, the call ends with INVALID_ARGUMENT on an answer
   * of the wrong type for its action (gRPC's code for a caller's malformed input), and
   * with DEADLINE_EXCEEDED on an action left unanswered past `answerWithinMs` (the
   * service's own wait for it expired). The service's source is not at hand to confirm
   * its exact codes; these are the ones gRPC defines for the two cases. A Workhorse in
   * front turns the INVALID_ARGUMENT into WebSocket close 4400 carrying the status
   * message (stream_manager.go Recv, websocket.go SendInvalidRequest).
   */
  private async request(action: Omit<Action, 'requestID'>, kind: string, answerWithinMs?: number): Promise<{ requestID: string; response: ActionResponse }> {
    const requestID = String(this.nextRequestId++);
    const signal = this.abort.signal;
    let giveUp: (() => void) | undefined;
    const answered = new Promise<ActionResponse | 'unanswered'>((resolve, reject) => {
      // One listener per pending request, removed when answered: a long scenario must
      // not pile listeners on the call's signal.
      const onAbort = (): void => reject(CALL_ENDED);
      signal.addEventListener('abort', onAbort, { once: true });
      const settle = (response: ActionResponse | 'unanswered'): void => {
        signal.removeEventListener('abort', onAbort);
        resolve(response);
      };
      this.waiting.set(requestID, settle);
      giveUp = () => {
        this.waiting.delete(requestID);
        settle('unanswered');
      };
    });
    await this.send({ requestID, ...action } as Action);
    // Counted from when the action was handed to the transport, as the service counts.
    const timer = answerWithinMs === undefined ? undefined : setTimeout(() => giveUp?.(), answerWithinMs);
    const response = await answered.finally(() => clearTimeout(timer));
    if (response === 'unanswered') return this.protocolError('DEADLINE_EXCEEDED', `${kind} #${requestID} unanswered after ${answerWithinMs} ms`);
    this.record?.actionResponses.push({ kind, requestID, response });
    this.host.changed();
    const expected = expectedResponseType(kind);
    if (response.response_type !== expected) {
      this.protocolError('INVALID_ARGUMENT', `${kind} #${requestID} answered with ${response.response_type ?? 'no response'}, expected ${expected}`);
    }
    return { requestID, response };
  }

  private protocolError(code: 'INVALID_ARGUMENT' | 'DEADLINE_EXCEEDED', message: string): never {
    this.record?.protocolErrors.push(message);
    this.finish('status', code, message);
    throw CALL_ENDED;
  }

  /** A `client` (or `track_llm_call`, or a turn's client action) step's check of the answer's content. */
  private check(kind: string, requestID: string, response: ActionResponse, expect: Record<string, unknown> | undefined, exact: boolean | undefined): void {
    if (expect === undefined) return;
    const mismatch = answerMismatch(response, expect, exact);
    if (mismatch === undefined) return;
    this.record?.protocolErrors.push(`unexpected answer to ${kind} #${requestID}: ${mismatch}`);
    this.finish('status', 'INVALID_ARGUMENT', `unexpected answer to ${kind} #${requestID}`);
    throw CALL_ENDED;
  }

  /**
   * Answered as Workhorse answers it (stream_manager.go HandleCloudServiceTracking): a
   * plainTextResponse, once the billing stream acknowledged the event.
   */
  private async trackLlmCall(step: Extract<Step, { op: 'track_llm_call' }>): Promise<void> {
    const workflowID = step.workflowID ?? this.record?.workflowId ?? '';
    const sentAt = Date.now();
    const track = { workflowID, featureQualifiedName: step.featureQualifiedName ?? 'duo_chat', featureAiCatalogItem: step.featureAiCatalogItem ?? false };
    const { requestID, response } = await this.request({ trackLlmCallForSelfHosted: track }, 'trackLlmCallForSelfHosted', step.answerWithinMs);
    this.record?.llmCalls.push({ requestID, workflowID, billed: this.host.billed(requestID, workflowID, sentAt) });
    this.host.changed();
    this.check('trackLlmCallForSelfHosted', requestID, response, step.expect, step.exact);
  }

  /** Continues after the last checkpoint any earlier call of this workflow sent. */
  private async turn(step: Extract<Step, { op: 'turn' }>): Promise<void> {
    const key = `${this.record?.workflowId ?? ''}/${step.id ?? 'turn'}`;
    const from = this.host.turnProgress(key);
    const progress = { key, from, to: from };
    if (this.record) this.record.turn = progress;
    for (let i = progress.from + 1; i <= step.checkpoints; i++) {
      if (step.intervalMs) await this.step({ op: 'wait', ms: step.intervalMs });
      // Held only after a step of this call: a call that starts at the last step does it at once, so a turn always ends.
      const held = step.finishAtMs !== undefined && i === step.checkpoints && i > progress.from + 1;
      const finishIn = held ? (step.finishAtMs as number) - (Date.now() - (this.record?.startedAt ?? 0)) : 0;
      if (finishIn > 0) await this.step({ op: 'wait', ms: Math.ceil(finishIn) });
      if (step.write) {
        await this.request(
          { runHTTPRequest: { method: step.write.method ?? 'POST', path: step.write.path, body: JSON.stringify({ step: i }) } },
          'runHTTPRequest',
          step.answerWithinMs,
        );
      }
      if (step.client) {
        const { action, kind } = scenarioAction(forStep(step.client.action, i, this.callNumber), "a turn's client action");
        if (kind === 'newCheckpoint') throw new BadScenario("a turn's client action needs an action that is answered, not a newCheckpoint");
        const { requestID, response } = await this.request(action, kind, step.answerWithinMs);
        this.check(kind, requestID, response, step.client.expect && forStep(step.client.expect, i, this.callNumber), step.client.exact);
      }
      // A checkpoint written is a checkpoint kept, even if the call ends before the client reads it.
      if (this.ended) throw CALL_ENDED;
      this.host.turnStepDone(key, i);
      progress.to = i;
      await this.send({
        requestID: String(this.nextRequestId++),
        newCheckpoint: { status: i === step.checkpoints ? 'FINISHED' : 'RUNNING', checkpoint: `step ${i}/${step.checkpoints}`, goal: this.record?.startRequest.goal ?? '' },
      });
    }
  }

  /** Reads a paginated GitLab API as the real service does: X-Next-Page, by its exact name. */
  private async paginate(step: Extract<Step, { op: 'paginate' }>): Promise<void> {
    const pagination: Pagination = { path: step.path, pages: [], items: 0, end: 'last_page' };
    this.record?.paginations.push(pagination);
    const perPage = step.perPage ?? 20;
    const separator = step.path.includes('?') ? '&' : '?';
    let page = 1;
    for (;;) {
      pagination.pages.push(page);
      const { response } = await this.request(
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
  }
}

/**
 * Ends a call as its client ends it: a cancel or an error at once, a half-close after
 * HALF_CLOSE_GRACE_MS (see there). Returns what clears that grace timer (the call ended first).
 */
export function followClientEnd<Req, Res>(call: grpc.ServerDuplexStream<Req, Res>, finish: (how: 'ok' | 'cancelled') => void, ended: () => boolean): () => void {
  let grace: NodeJS.Timeout | undefined;
  call.on('cancelled', () => finish('cancelled'));
  call.on('end', () => {
    if (ended()) return;
    grace = setTimeout(() => finish(call.cancelled ? 'cancelled' : 'ok'), HALF_CLOSE_GRACE_MS);
  });
  call.on('error', () => finish('cancelled'));
  return () => clearTimeout(grace);
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

function countItems(body: string | undefined): number {
  try {
    const parsed: unknown = JSON.parse(body ?? '');
    return Array.isArray(parsed) ? parsed.length : 0;
  } catch {
    return 0;
  }
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
