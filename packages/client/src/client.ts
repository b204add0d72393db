/**
 * The dispatcher's side of longrun (docs/spec.md §3, §5, §6): start turns, stop them, read the run
 * in flight. One client per process; it keeps its connections (an undici Agent) until
 * close().
 *
 *   execute()  POST …/execute: 202 accepted / 200 finished (detached), a checkpoint stream
 *              (blocking), 409 locked / stopped as results; every other answer a LongrunError.
 *              Retryable failures are retried (retry.ts) across the endpoints.
 *   stop()     POST /internal/workflows/:id/stop with an owner JWT made here.
 *   getRun()   GET  /internal/workflows/:id/run, the record of the run in flight (or null).
 *   follow()   GET  …/workflows/:id/follow, the workflow's runs live (docs/spec.md §14): an async
 *              iterator of typed events that resumes by Last-Event-ID after a drop (follow.ts).
 */
import { randomUUID } from 'node:crypto';
import { Agent, request, type Dispatcher } from 'undici';
import type { StartWorkflowRequest } from './contract';
import { abortReason, LongrunError } from './errors';
import { signOwnerToken } from './jwt';
import { BlockingStream } from './ndjson';
import type { ExecuteResult, RunRecord, StopResult } from './outcomes';
import { acceptedSchema, errorOf, finishedSchema, headerValue, isNdjson, parseBody, runRecordSchema, stopRequestedSchema, ERROR_BODY_LIMIT, type Answer } from './responses';
import { defaultRetryOptions, systemClock, withRetries, type RetryClock, type RetryOptions } from './retry';
import { version } from './version';
import { followEvents, type FollowEvent, type FollowOptions } from './follow';

export interface LongrunClientOptions {
  /**
   * The gateway's base URL (e.g. a load balancer), or several replicas' URLs: a retryable
   * failure on one moves to the next, as a load balancer would.
   */
  url: string | readonly string[];
  /** The shared secret (the 32 bytes of Workhorse's secret file); needed by stop() and getRun(). */
  secret?: Uint8Array;
  /** Headers sent with every execute, e.g. the credentials the owner's preauth checks. */
  headers?: Record<string, string>;
  retry?: Partial<RetryOptions>;
  /** Waiting for an answer's headers (default 60 000 ms: a detached accept waits up to 10 s). */
  headersTimeoutMs?: number;
  /** Silence allowed between two chunks of a blocking stream (default 120 000 ms; keepalives come every 20 s). */
  bodyTimeoutMs?: number;
  /** An undici dispatcher to use instead of the client's own Agent (not closed by close()). */
  dispatcher?: Dispatcher;
  /** For tests: the retry loop's time. */
  clock?: RetryClock;
}

/**
 * The execute body: a StartWorkflowRequest in protojson (docs/spec.md §3), whose
 * `workflowMetadata` may be given as an object (sent as its JSON text). Fields this
 * contract does not list pass through (the gateway drops those the service's does not know).
 */
export type StartWorkflowInput = Omit<StartWorkflowRequest, 'workflowMetadata'> & {
  workflowMetadata?: string | Record<string, unknown>;
  [field: string]: unknown;
};

export interface CallOptions {
  /** Sent as X-Request-Id (kept by the gateway when it matches ^[A-Za-z0-9_-]{1,64}$); default a new UUID. */
  requestId?: string;
  signal?: AbortSignal;
  /** Overrides the client's retry options for this call; `false` = one attempt. */
  retry?: Partial<RetryOptions> | false;
}

export interface ExecuteOptions extends CallOptions {
  /** Extra headers for this execute (passed to the owner's preauth). */
  headers?: Record<string, string>;
  /** Query string parameters (forwarded to the owner's preauth). */
  query?: Record<string, string>;
}

type Method = 'GET' | 'POST';

export class LongrunClient {
  private readonly endpoints: readonly string[];
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly retry: RetryOptions;
  private readonly clock: RetryClock;
  /** Spreads first attempts over the endpoints. */
  private next = 0;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: LongrunClientOptions) {
    const urls = typeof options.url === 'string' ? [options.url] : [...options.url];
    if (urls.length === 0) throw new TypeError('LongrunClient needs at least one url');
    this.endpoints = urls.map((u) => new URL(u).href.replace(/\/+$/, ''));
    this.ownsDispatcher = !options.dispatcher;
    this.dispatcher = options.dispatcher ?? new Agent({ keepAliveTimeout: 10_000 });
    this.retry = { ...defaultRetryOptions, ...options.retry };
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Starts (or resumes) a turn of `workflowId`. Resolves with a typed result — accepted,
   * finished, locked, stopped, or streaming when the owner chose blocking mode — and
   * throws a LongrunError for everything else, after retrying what may succeed later.
   */
  async execute(workflowId: string, start: StartWorkflowInput = {}, options: ExecuteOptions = {}): Promise<ExecuteResult> {
    const body = JSON.stringify(
      typeof start.workflowMetadata === 'object' && start.workflowMetadata !== null ? { ...start, workflowMetadata: JSON.stringify(start.workflowMetadata) } : start,
    );
    const query = options.query ? `?${new URLSearchParams(options.query).toString()}` : '';
    const path = `/api/v4/ai/duo_workflows/workflows/${encodeURIComponent(workflowId)}/execute${query}`;
    const headers = { 'content-type': 'application/json', ...this.options.headers, ...options.headers };
    const { value, attempts, endpoint } = await this.withRetries(options, async (base, requestId) => {
      const response = await this.send(base, 'POST', path, { ...headers, 'x-request-id': requestId }, body, options.signal);
      const answeredId = headerValue(response.headers, 'x-request-id') ?? requestId;
      if (response.statusCode === 200 && isNdjson(response.headers)) {
        return { kind: 'streaming' as const, requestId: answeredId, stream: new BlockingStream(response.body, { requestId: answeredId, endpoint: base }) };
      }
      const answer = await this.read(base, response, answeredId);
      if (answer.status === 202) {
        const accepted = parseBody(answer, acceptedSchema);
        return { kind: 'accepted' as const, requestId: answeredId, runId: accepted.run_id, acceptedOn: accepted.accepted_on };
      }
      if (answer.status === 200) return { kind: 'finished' as const, requestId: answeredId, runId: parseBody(answer, finishedSchema).run_id };
      const error = errorOf(answer);
      if (error.code === 'WORKFLOW_LOCKED') return { kind: 'locked' as const, requestId: answeredId, retryAfterS: error.retryAfterS };
      if (error.code === 'STOPPED') return { kind: 'stopped' as const, requestId: answeredId };
      throw error;
    });
    return { ...value, workflowId, endpoint, attempts };
  }

  /**
   * Asks the run in flight of `workflowId`, on whichever replica, to stop (`reason`, a
   * token like `CANCELLED_BY_USER`, is what the workflow service is told; default
   * USER_STOP). Needs `secret`.
   */
  async stop(workflowId: string, options: CallOptions & { reason?: string } = {}): Promise<StopResult> {
    const body = options.reason === undefined ? '' : JSON.stringify({ reason: options.reason });
    const { value } = await this.internal(workflowId, 'POST', 'stop', body, options, (answer) => {
      if (answer.status === 202) return { kind: 'stop_requested' as const, workflowId, reason: parseBody(answer, stopRequestedSchema).reason, requestId: answer.requestId };
      const error = errorOf(answer);
      if (error.code === 'NOT_CANCELLABLE') return { kind: 'not_cancellable' as const, workflowId, requestId: answer.requestId };
      throw error;
    });
    return value;
  }

  /** The record of the run in flight of `workflowId` (with its `in_flight` actions), or null when none. Needs `secret`. */
  async getRun(workflowId: string, options: CallOptions = {}): Promise<RunRecord | null> {
    const { value } = await this.internal(workflowId, 'GET', 'run', undefined, options, (answer) => {
      if (answer.status === 200) return parseBody(answer, runRecordSchema);
      const error = errorOf(answer);
      if (answer.status === 404 && error.code === 'NOT_FOUND') return null;
      throw error;
    });
    return value;
  }

  /**
   * Follows `workflowId`'s runs live, from any replica, across its segments (docs/spec.md §14):
   * `for await (const event of client.follow(id)) …` yields run, checkpoint, action,
   * parked/attached and end events, and `idle` last. A stream that drops (a drain, a cut
   * connection) is reopened by itself with Last-Event-ID, on the next endpoint: every event
   * once, in order. `after` starts after an event id. Throws a LongrunError for a refusal
   * (the owner's PREAUTH_DENIED, INVALID_REQUEST) or once the retry policy is spent, or the
   * signal's reason. Leaving the loop closes the stream.
   */
  follow(workflowId: string, options: FollowOptions = {}): AsyncGenerator<FollowEvent, void, undefined> {
    return followEvents(
      {
        endpoints: this.endpoints,
        first: this.next++,
        retry: this.retry,
        clock: this.clock,
        // The body timeout (bodyTimeoutMs) is the dead-connection check: keepalives come every 20 s; a silent stream is reopened.
        get: (endpoint, path, headers, signal) => this.send(endpoint, 'GET', path, { ...this.options.headers, 'x-request-id': randomUUID(), ...headers }, undefined, signal),
        refusal: async (endpoint, response) => errorOf(await this.read(endpoint, response, headerValue(response.headers, 'x-request-id') ?? '')),
      },
      workflowId,
      options,
    );
  }

  /** Closes the client's own connections (not a dispatcher it was given). Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.ownsDispatcher ? this.dispatcher.close().catch(() => undefined) : Promise.resolve();
    return this.closing;
  }

  private async internal<T>(workflowId: string, method: Method, route: 'stop' | 'run', body: string | undefined, options: CallOptions, judge: (answer: Answer) => T) {
    const secret = this.options.secret;
    if (!secret) throw new TypeError(`LongrunClient.${route === 'stop' ? 'stop' : 'getRun'}() needs the shared secret (options.secret)`);
    const path = `/internal/workflows/${encodeURIComponent(workflowId)}/${route}`;
    return this.withRetries(options, async (base, requestId) => {
      // Signed per attempt: one workflow, one minute (the routes accept at most five).
      const token = await signOwnerToken(secret, workflowId);
      const headers = { authorization: `Bearer ${token}`, 'x-request-id': requestId, ...(body ? { 'content-type': 'application/json' } : {}) };
      const response = await this.send(base, method, path, headers, body, options.signal);
      return judge(await this.read(base, response, headerValue(response.headers, 'x-request-id') ?? requestId));
    });
  }

  private withRetries<T>(options: CallOptions, attempt: (endpoint: string, requestId: string) => Promise<T>) {
    const requestId = options.requestId ?? randomUUID();
    const policy = options.retry === false ? { ...this.retry, maxAttempts: 1 } : { ...this.retry, ...options.retry };
    const first = this.next++;
    return withRetries(this.endpoints, first, (endpoint) => attempt(endpoint, requestId), policy, this.clock, options.signal);
  }

  /** One HTTP exchange; a failure without an answer is NETWORK_ERROR (or the caller's abort). */
  private async send(
    base: string,
    method: Method,
    path: string,
    headers: Record<string, string>,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Dispatcher.ResponseData> {
    try {
      return await request(`${base}${path}`, {
        method,
        headers: { 'user-agent': `longrun-client/${version}`, ...headers },
        body,
        signal,
        dispatcher: this.dispatcher,
        headersTimeout: this.options.headersTimeoutMs ?? 60_000,
        bodyTimeout: this.options.bodyTimeoutMs ?? 120_000,
      });
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      const code = (err as { code?: string }).code;
      throw new LongrunError('NETWORK_ERROR', `${method} ${base}${path} failed: ${code ?? (err as Error).message}`, {
        retryable: true,
        requestId: headers['x-request-id'],
        endpoint: base,
        cause: err,
      });
    }
  }

  /** Reads a (small) answer's body; one cut off is a NETWORK_ERROR. */
  private async read(base: string, response: Dispatcher.ResponseData, requestId: string): Promise<Answer> {
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of response.body) {
        chunks.push(chunk as Buffer);
        size += (chunk as Buffer).length;
        if (size > ERROR_BODY_LIMIT) {
          response.body.destroy();
          break;
        }
      }
    } catch (err) {
      throw new LongrunError('NETWORK_ERROR', `the answer from ${base} was cut off`, { status: response.statusCode, retryable: true, requestId, endpoint: base, cause: err });
    }
    const text = Buffer.concat(chunks).subarray(0, ERROR_BODY_LIMIT).toString('utf8');
    return { status: response.statusCode, headers: response.headers, text, endpoint: base, requestId };
  }
}
