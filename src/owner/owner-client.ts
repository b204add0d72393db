/**
 * Every call longrun makes to the owner service (docs/spec.md §2, §6), over one undici Pool per
 * origin: the pre-authorization and the segment-end callback to the owner URL, the
 * runHTTPRequest relay to the relay URL (relay-target.ts; a pool of its own when it names
 * another origin). Each has a deadline; failures are translated to GatewayErrors here. Each is a
 * CLIENT span (tracing.ts) under the span that makes it, and carries X-Request-Id (the
 * correlation id, docs/spec.md §13) and, with tracing on, the span's `traceparent`. Relays
 * and callbacks are counted here (metrics.ts).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SegmentEnd } from '@longrun/client';
import { Pool, util, type Dispatcher } from 'undici';
import { GatewayError } from '../core/errors';
import type { CallbackResult } from './words';
import { gitlabWorkhorseHeader, userAgent } from '../core/version';
import { JwtSigner } from '../core/jwt';
import { passedOnDenialHeaders } from './http-headers';
import { DENIAL_BODY_LIMIT, PREAUTH_CONTENT_TYPE, forwardedHeaders, preauthSchema, followPreauthSchema, websocketPreauthSchema, type PreauthAnswer } from './preauth';
import { OwnerCall, type CallEnd, type OwnerCallOptions } from './owner-call';
import { relayResult, type RelayResult } from './relay-call';
import { checkRelayPath } from './relay-path';
import { RELAY_USER_AGENT, relativeRootOf, withRelativeRoot } from './relay-target';
import { Semaphore } from '../core/semaphore';
import { TraceSpan, Tracing, type TraceHeaders } from '../observability/tracing';
import type { OwnerMetrics } from './metrics';

/** The largest preauth answer read (a 200's body); a larger one is PREAUTH_INVALID. */
const PREAUTH_ANSWER_LIMIT = 4 * 1024 * 1024;

/** Of a segment-end answer only the status counts; this much of its body is read before the connection is dropped. */
const SEGMENT_END_ANSWER_LIMIT = 128 * 1024;

/** 4 MiB − 4 KiB: a relayed body must fit, with its envelope, in one 4 MiB gRPC message. */
const RELAY_BODY_LIMIT = 4 * 1024 * 1024 - 4 * 1024;

/**
 * The methods a runHTTPRequest may use (docs/spec.md §6). Anything else (CONNECT, TRACE, OPTIONS,
 * made-up methods) is answered with an error and never sent: the workflow service has no
 * use for them, and CONNECT or TRACE through an authenticated relay is an attack surface.
 */
const RELAY_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
const relayMethods: ReadonlySet<string> = new Set(RELAY_METHODS);

export type { RelayAnswer, RelayResult } from './relay-call';

export interface OwnerClientOptions {
  ownerUrl: URL;
  /** Where runHTTPRequests go (default `ownerUrl`); its path is the relative URL root. */
  relayUrl?: URL;
  secret: Uint8Array;
  preauthTimeoutMs: number;
  relayTimeoutMs: number;
  /** Connections in each pool (undici's default is unlimited). */
  connections: number;
  /** Tries of one segment-end callback, and the deadline of each. */
  callbackAttempts: number;
  callbackTimeoutMs: number;
  /** Segment-end callbacks in flight at once (default 64); the others wait, within their signal. */
  callbackConcurrency?: number;
  /** How long a signed Gitlab-Workhorse-Api-Request JWT is reused. */
  jwtRefreshMs: number;
  /** Each call's span (default: tracing off). */
  tracing?: Tracing;
  /** Where relays and callbacks are counted (default: nowhere). */
  metrics?: OwnerMetrics;
}

/** The owner's refusal of a preauth, to pass on to the caller. */
export interface PreauthDenial {
  kind: 'denied';
  status: number;
  /** The first 32 KiB of the owner's body. */
  body: Buffer;
  /**
   * The owner's end-to-end headers to pass on (Content-Type, WWW-Authenticate,
   * Retry-After, Location, Set-Cookie …), canonical names, repeated ones as arrays;
   * without hop-by-hop headers, Content-Length and X-Request-Id.
   */
  headers: Record<string, string | string[]>;
}

/** What the preauth decided: a run may start (answer), or the caller gets the owner's refusal. */
export type PreauthResult = { kind: 'authorized'; answer: PreauthAnswer } | PreauthDenial;

export interface RelayRequest {
  method: string;
  path: string;
  body?: string;
  token: string;
  workflowId: string;
  requestId: string;
  /** Apply the relay timeout (the owner's TimeoutHTTPRequests). */
  timeout: boolean;
  signal: AbortSignal;
  /** X-Forwarded-For to send: the caller's chain plus the caller's address (caller.ts forwardedForOf). */
  forwardedFor?: string;
  /** The span the relay's span is a child of (the run's). */
  parent?: TraceSpan;
}

/** PREAUTH_INVALID for an answer its schema refused, at its first issue. */
function malformed(issue: { path: PropertyKey[]; message: string } | undefined): GatewayError {
  return new GatewayError('PREAUTH_INVALID', `owner preauth answer is malformed at ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`);
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** What a call's span records of its end: the owner's status, or why there was none. */
function endOf(end: CallEnd): { status?: number; error?: string } {
  if (end.kind !== 'answer') return { error: end.kind };
  return end.overflow ? { status: end.statusCode, error: 'too_large' } : { status: end.statusCode };
}

/** What a segment-end callback's span records: the attempts made, and how the last one ended. */
interface Tried {
  attempts: number;
  last: CallEnd | undefined;
}

export class OwnerClient {
  private readonly pool: Pool;
  private readonly basePath: string;
  /** The relay URL's pool: `pool` itself when it names the owner's origin. */
  private readonly relayPool: Pool;
  private readonly relayRoot: string;
  /** host:port of the relay URL, as a network failure's text names it. */
  private readonly relayHost: string;
  private readonly jwt: JwtSigner;
  /** Bounds the segment-end callbacks in flight: a drain ends thousands of runs at once. */
  private readonly callbackSlots: Semaphore;
  private readonly tracing: Tracing;
  private closing: Promise<void> | undefined;

  /** Segment-end callbacks being sent, and waiting for a slot (/debug/structures). */
  get callbacksHeld(): { sending: number; waiting: number } {
    return { sending: this.callbackSlots.active, waiting: this.callbackSlots.waiting };
  }

  constructor(private readonly options: OwnerClientOptions) {
    this.pool = new Pool(options.ownerUrl.origin, {
      connections: options.connections,
      keepAliveTimeout: 30_000,
    });
    this.basePath = relativeRootOf(options.ownerUrl);
    const relayUrl = options.relayUrl ?? options.ownerUrl;
    this.relayPool = relayUrl.origin === options.ownerUrl.origin ? this.pool : new Pool(relayUrl.origin, { connections: options.connections, keepAliveTimeout: 30_000 });
    this.relayRoot = relativeRootOf(relayUrl);
    this.relayHost = relayUrl.host;
    this.jwt = new JwtSigner(options.secret, undefined, options.jwtRefreshMs);
    this.callbackSlots = new Semaphore(options.callbackConcurrency ?? 64);
    this.tracing = options.tracing ?? Tracing.OFF;
  }

  /** Ends `span` with how `call` ended, and hands the end on. */
  private traced(span: TraceSpan, call: Promise<CallEnd>): Promise<CallEnd> {
    if (span === TraceSpan.NONE) return call;
    return call.then((end) => {
      const { status, error } = endOf(end);
      this.tracing.ownerCallEnded(span, status, error);
      return end;
    });
  }

  /**
   * Asks the owner whether this execute may run: same method, path and query rebased on
   * the owner URL, no body, filtered headers plus Gitlab-Workhorse and the JWT.
   * Throws GatewayError OWNER_UNAVAILABLE (unreachable, deadline) or PREAUTH_INVALID.
   * `route` 'websocket': the answer need not name the workflow (docs/spec.md §11).
   * With tracing on, the caller's `traceparent` is replaced by the preauth span's (a child of `parent`).
   */
  async preauthorize(
    method: string,
    originalUrl: string,
    headers: IncomingHttpHeaders,
    requestId: string,
    signal?: AbortSignal,
    route: 'execute' | 'websocket' = 'execute',
    parent: TraceSpan = TraceSpan.NONE,
  ): Promise<PreauthResult> {
    const asked = await this.askOwner(method, originalUrl, headers, requestId, signal, parent);
    if (asked.kind === 'denied') return asked;
    const parsed = (route === 'websocket' ? websocketPreauthSchema : preauthSchema).safeParse(asked.json);
    if (!parsed.success) throw malformed(parsed.error.issues[0]);
    return { kind: 'authorized', answer: parsed.data };
  }

  /**
   * Asks the owner whether the caller may follow `workflowId` (docs/spec.md §14): a GET of the
   * follow route's path and query, as preauthorize asks. Authorized when the owner answers a
   * preauth (followPreauthSchema); its refusal is passed on. Throws as preauthorize does, and
   * PREAUTH_INVALID when the answer names another workflow.
   */
  async authorizeFollow(
    originalUrl: string,
    headers: IncomingHttpHeaders,
    requestId: string,
    workflowId: string,
    signal?: AbortSignal,
    parent: TraceSpan = TraceSpan.NONE,
  ): Promise<PreauthDenial | undefined> {
    const asked = await this.askOwner('GET', originalUrl, headers, requestId, signal, parent);
    if (asked.kind === 'denied') return asked;
    const parsed = followPreauthSchema.safeParse(asked.json);
    if (!parsed.success) throw malformed(parsed.error.issues[0]);
    const named = parsed.data.DuoWorkflow?.WorkflowID;
    if (named !== undefined && named !== null && named !== workflowId)
      throw new GatewayError('PREAUTH_INVALID', 'owner preauth answer names another workflow than the one followed');
    return undefined;
  }

  /**
   * One preauth request: same method, path and query rebased on the owner URL, no body,
   * filtered headers plus Gitlab-Workhorse and the JWT. A non-200 is the owner's refusal;
   * a 200 must be of the preauth content type and JSON. Throws GatewayError
   * OWNER_UNAVAILABLE (unreachable, deadline) or PREAUTH_INVALID.
   */
  private async askOwner(
    method: string,
    originalUrl: string,
    headers: IncomingHttpHeaders,
    requestId: string,
    signal: AbortSignal | undefined,
    parent: TraceSpan,
  ): Promise<PreauthDenial | { kind: 'answered'; json: unknown }> {
    const span = this.tracing.ownerCall(parent, 'preauth', method);
    const trace = span.headers;
    const end = await this.traced(
      span,
      this.call({ signal, timeoutMs: this.options.preauthTimeoutMs, bodyLimit: (status) => (status === 200 ? PREAUTH_ANSWER_LIMIT : DENIAL_BODY_LIMIT) }, (jwt) => ({
        method: method as Dispatcher.HttpMethod,
        path: this.basePath + originalUrl,
        headers: {
          ...forwardedHeaders(headers),
          ...trace,
          'gitlab-workhorse': gitlabWorkhorseHeader,
          'gitlab-workhorse-api-request': jwt,
          'x-request-id': requestId,
        },
        headersTimeout: this.options.preauthTimeoutMs,
        bodyTimeout: this.options.preauthTimeoutMs,
      })),
    );
    if (end.kind !== 'answer') {
      const why = end.answered ? 'answer was cut off' : end.kind === 'timeout' ? 'timed out' : 'unreachable';
      throw new GatewayError('OWNER_UNAVAILABLE', `owner service ${why}`, { cause: end.kind === 'network' ? end.error : undefined });
    }
    const answerHeaders = util.parseHeaders(end.rawHeaders) as IncomingHttpHeaders;
    if (end.statusCode !== 200) {
      return { kind: 'denied', status: end.statusCode, body: end.body, headers: passedOnDenialHeaders(answerHeaders) };
    }
    const contentType = headerValue(answerHeaders['content-type']);
    if (end.overflow) throw new GatewayError('PREAUTH_INVALID', 'owner preauth answer is too large');
    if (!contentType || contentType.split(';')[0]?.trim().toLowerCase() !== PREAUTH_CONTENT_TYPE) {
      throw new GatewayError('PREAUTH_INVALID', `owner preauth answer has content type ${contentType ?? '(none)'}, expected ${PREAUTH_CONTENT_TYPE}`);
    }
    try {
      return { kind: 'answered', json: JSON.parse(end.body.toString('utf8')) };
    } catch (err) {
      throw new GatewayError('PREAUTH_INVALID', 'owner preauth answer is not valid JSON', { cause: err });
    }
  }

  /**
   * Performs a runHTTPRequest against the owner API, at the relay URL. Never throws: failures
   * are answered to the workflow service as an httpResponse error (docs/spec.md §6 wording).
   * The request carries what Workhorse's relay sends, so Rails' require_gitlab_workhorse!-style
   * guards pass (Gitlab-Workhorse and the Gitlab-Workhorse-Api-Request JWT).
   */
  relay(req: RelayRequest): Promise<RelayResult> {
    const { metrics } = this.options;
    if (!metrics) return this.relayed(req);
    const started = performance.now();
    return this.relayed(req).then((result) => {
      if (!result.ok) metrics.relayError(result.type);
      else metrics.relay(req.method, result.statusCode, (performance.now() - started) / 1000);
      return result;
    });
  }

  private relayed(req: RelayRequest): Promise<RelayResult> {
    const method = (req.method || 'GET').toUpperCase();
    if (!relayMethods.has(method)) {
      return Promise.resolve({ ok: false, type: 'refused_method', error: `invalid method: ${JSON.stringify(req.method.slice(0, 32))} (allowed: ${RELAY_METHODS.join(', ')})` });
    }
    const checked = checkRelayPath(req.path);
    if (!checked.ok) return Promise.resolve({ ok: false, type: 'refused_path', error: `invalid path: ${checked.reason}` });
    const span = this.tracing.ownerCall(req.parent ?? TraceSpan.NONE, 'relay', method);
    const trace = span.headers;
    return this.traced(
      span,
      this.call(
        { signal: req.signal, timeoutMs: req.timeout ? this.options.relayTimeoutMs : undefined, bodyLimit: () => RELAY_BODY_LIMIT },
        (jwt) => this.relayRequest(req, method, checked.path, jwt, trace),
        this.relayPool,
      ),
    ).then((end) => relayResult(end, RELAY_BODY_LIMIT, this.relayHost));
  }

  private relayRequest(req: RelayRequest, method: string, path: string, jwt: string, trace: TraceHeaders | undefined): Dispatcher.DispatchOptions {
    const headers = [
      'authorization',
      `Bearer ${req.token}`,
      'content-type',
      'application/json',
      'gitlab-workhorse',
      gitlabWorkhorseHeader,
      'gitlab-workhorse-api-request',
      jwt,
      'x-gitlab-duo-workflow-id',
      req.workflowId,
      'x-request-id',
      req.requestId,
    ];
    if (req.forwardedFor) headers.push('x-forwarded-for', req.forwardedFor);
    headers.push('user-agent', RELAY_USER_AGENT);
    if (trace) {
      headers.push('traceparent', trace.traceparent);
      if (trace.tracestate) headers.push('tracestate', trace.tracestate);
    }
    return {
      method: method as Dispatcher.HttpMethod,
      path: withRelativeRoot(this.relayRoot, path),
      headers,
      body: req.body === undefined || req.body === '' ? undefined : req.body,
    };
  }

  /**
   * One call to the owner (on `pool`, the owner's by default): the request `build` makes with
   * the signed JWT, dispatched with an OwnerCall. Never rejects: a JWT that cannot be signed
   * is a network failure (nothing was sent), a signal already aborted an abort. The signed
   * token is cached (JwtSigner): waited for only while it is being (re)signed. Each attempt
   * of a retried call comes through here, so each carries the token current when it is sent.
   */
  private call(options: OwnerCallOptions, build: (jwt: string) => Dispatcher.DispatchOptions, pool: Pool = this.pool): Promise<CallEnd> {
    const jwt = this.jwt.current();
    if (jwt !== undefined) return this.dispatch(options, build(jwt), pool);
    return this.jwt.get().then(
      (signed) => this.dispatch(options, build(signed), pool),
      (err: unknown): CallEnd => ({ kind: 'network', error: err instanceof Error ? err : new Error(String(err)), answered: false }),
    );
  }

  private dispatch(options: OwnerCallOptions, request: Dispatcher.DispatchOptions, pool: Pool): Promise<CallEnd> {
    if (options.signal?.aborted) return Promise.resolve({ kind: 'aborted', answered: false });
    const call = new OwnerCall(options);
    pool.dispatch(request, call);
    return call.ended;
  }

  /**
   * Tells the owner a detached run's segment ended (docs/spec.md §6): up to `callbackAttempts`
   * tries with short backoff on 5xx, 429 and network errors, all within `signal` (the
   * drain budget). At most `callbackConcurrency` callbacks are in flight at once (over the
   * pool's keep-alive connections); the others wait their turn, and one whose signal
   * aborts while waiting is 'failed' without being sent. One span (a child of `parent`,
   * the run's) covers the wait and every attempt.
   */
  async segmentEnd(body: SegmentEnd, requestId: string, signal: AbortSignal, parent: TraceSpan = TraceSpan.NONE): Promise<CallbackResult> {
    const result = await this.calledBack(body, requestId, signal, parent);
    this.options.metrics?.callback(result);
    return result;
  }

  private async calledBack(body: SegmentEnd, requestId: string, signal: AbortSignal, parent: TraceSpan): Promise<CallbackResult> {
    const span = this.tracing.ownerCall(parent, 'segment_end', 'POST');
    const tried: Tried = { attempts: 0, last: undefined };
    let result: CallbackResult = 'failed';
    try {
      if (!(await this.callbackSlots.acquire(signal))) return result;
      try {
        result = await this.sendSegmentEnd(body, requestId, signal, span.headers, tried);
        return result;
      } finally {
        this.callbackSlots.release();
      }
    } finally {
      const { status, error } = tried.last ? endOf(tried.last) : { status: undefined, error: 'aborted' };
      this.tracing.ownerCallEnded(span, status, result === 'failed' ? (error ?? 'failed') : undefined, {
        'longrun.callback.result': result,
        'longrun.callback.attempts': tried.attempts,
        'longrun.end_reason': body.reason,
      });
    }
  }

  private async sendSegmentEnd(body: SegmentEnd, requestId: string, signal: AbortSignal, trace: TraceHeaders | undefined, tried: Tried): Promise<CallbackResult> {
    const attempts = this.options.callbackAttempts;
    const path = `${this.basePath}/api/v4/internal/ai/duo_workflows/workflows/${encodeURIComponent(body.workflow_id)}/segment_end`;
    // An attempt's deadline is undici's own header and body timeouts (a 2xx answer has no
    // body to speak of): no timer or AbortController per attempt, which a drain of
    // thousands of runs would pay for each callback.
    const timeoutMs = this.options.callbackTimeoutMs;
    for (let attempt = 1; attempt <= attempts && !signal.aborted; attempt++) {
      let retryable = true;
      const end = await this.call({ signal, bodyLimit: () => SEGMENT_END_ANSWER_LIMIT }, (jwt) => ({
        method: 'POST',
        path,
        headers: {
          'content-type': 'application/json',
          'gitlab-workhorse': gitlabWorkhorseHeader,
          'gitlab-workhorse-api-request': jwt,
          'x-request-id': requestId,
          'user-agent': userAgent,
          ...trace,
        },
        body: JSON.stringify(body),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      }));
      tried.attempts = attempt;
      tried.last = end;
      if (end.kind === 'answer') {
        if (end.statusCode < 300) return attempt === 1 ? 'ok' : 'retried_ok';
        retryable = end.statusCode >= 500 || end.statusCode === 429;
      }
      if (!retryable || attempt === attempts) break;
      // 100 ms, 300 ms: short, so a drain's budget is not spent waiting.
      await sleep(100 * 3 ** (attempt - 1), undefined, { signal }).catch(() => undefined);
    }
    return 'failed';
  }

  /** The pools: the owner's, and the relay URL's when it is another. */
  private pools(): Pool[] {
    return this.relayPool === this.pool ? [this.pool] : [this.pool, this.relayPool];
  }

  /** Closes the pools once their requests in flight are done. Idempotent. */
  close(): Promise<void> {
    this.closing ??= Promise.all(this.pools().map((pool) => pool.close().catch(() => pool.destroy()))).then(() => undefined);
    return this.closing;
  }

  /** Ends every connection now, requests in flight included (their callers see an error). */
  destroy(): void {
    for (const pool of this.pools()) pool.destroy().catch(() => undefined);
  }
}
