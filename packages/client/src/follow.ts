/**
 * Following a workflow's runs live (docs/spec.md §14): `GET …/workflows/:id/follow`, read as
 * Server-Sent Events and handed out as typed events by an async iterator that resumes by
 * itself. A stream that ends without `idle` — the replica serving it drained, it was cut
 * as too slow, the connection broke — is opened again, on the next endpoint, with
 * `Last-Event-ID`: the gateway replays what came after, so the iterator yields every event
 * once and in order, across replicas. It ends after `idle` (no run in flight and none came:
 * docs/spec.md §14), or throws: a refusal that no retry can mend (the owner's, a bad
 * position), the retry policy spent on retryable ones, or the caller's signal.
 */
import type { Dispatcher } from 'undici';
import { followEventKinds, type FollowEventKind } from './vocabulary';
import { abortReason, LongrunError } from './errors';
import { followEventDataSchemas, type FollowEvent } from './follow-events';
import { headerValue } from './responses';
import { retryDelayMs, withRetries, type RetryClock, type RetryOptions } from './retry';
import { serverSentEvents } from './sse';

export type { FollowEvent } from './follow-events';

const kinds: ReadonlySet<string> = new Set<FollowEventKind>(followEventKinds);

export interface FollowOptions {
  /** Start after this event id (a position from an earlier follow); default: the latest run and checkpoint, then live. */
  after?: number;
  /** Ends the follow: the iterator throws the signal's reason. */
  signal?: AbortSignal;
  /** Extra headers for the owner's preauth (the follower's credentials). */
  headers?: Record<string, string>;
  /** Query string parameters (passed to the owner's preauth). */
  query?: Record<string, string>;
  /** Overrides the client's retry options for opening (and reopening) the stream. */
  retry?: Partial<RetryOptions>;
}

/** What a follow needs of the client: its endpoints, its retry policy, one GET and how it reads a refusal. */
export interface FollowDeps {
  endpoints: readonly string[];
  /** The endpoint tried first. */
  first: number;
  retry: RetryOptions;
  clock: RetryClock;
  /** One GET with the client's dispatcher; a failure without an answer is a LongrunError (NETWORK_ERROR). */
  get(endpoint: string, path: string, headers: Record<string, string>, signal: AbortSignal | undefined): Promise<Dispatcher.ResponseData>;
  /** The error a non-stream answer stands for (its body read). */
  refusal(endpoint: string, response: Dispatcher.ResponseData): Promise<LongrunError>;
}

function isEventStream(response: Dispatcher.ResponseData): boolean {
  return (headerValue(response.headers, 'content-type') ?? '').split(';')[0]?.trim().toLowerCase() === 'text/event-stream';
}

function eventOf(event: string, id: string | undefined, data: string, endpoint: string): FollowEvent | undefined {
  if (!kinds.has(event)) return undefined;
  const unreadable = (cause?: unknown): LongrunError =>
    new LongrunError('UNEXPECTED_RESPONSE', `an unreadable ${event} event from ${endpoint}`, { status: 200, retryable: false, endpoint, body: data.slice(0, 1_024), cause });
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch (err) {
    throw unreadable(err);
  }
  const parsed = followEventDataSchemas[event as FollowEventKind].safeParse(json);
  if (!parsed.success) throw unreadable(parsed.error);
  return { event, id: id === undefined || event === 'idle' ? undefined : Number(id), data: parsed.data } as FollowEvent;
}

/** The events of `workflowId`'s runs until `idle`, reopened by Last-Event-ID after each drop. */
export async function* followEvents(deps: FollowDeps, workflowId: string, options: FollowOptions = {}): AsyncGenerator<FollowEvent, void, undefined> {
  const { signal } = options;
  const policy = { ...deps.retry, ...options.retry };
  const query = options.query ? `?${new URLSearchParams(options.query).toString()}` : '';
  const path = `/api/v4/ai/duo_workflows/workflows/${encodeURIComponent(workflowId)}/follow${query}`;
  let last = options.after;
  let next = deps.first;
  /** Drops in a row with no event between them: the pause before reopening grows with them. */
  let drops = 0;
  for (;;) {
    const opened = await withRetries(
      deps.endpoints,
      next,
      async (endpoint) => {
        const headers: Record<string, string> = { accept: 'text/event-stream', ...options.headers, ...(last === undefined ? {} : { 'last-event-id': String(last) }) };
        const response = await deps.get(endpoint, path, headers, signal);
        if (response.statusCode === 200 && isEventStream(response)) return response;
        throw await deps.refusal(endpoint, response);
      },
      policy,
      deps.clock,
      signal,
    );
    const { endpoint } = opened;
    const body = opened.value.body;
    try {
      for await (const sse of serverSentEvents(body)) {
        const event = eventOf(sse.event, sse.id, sse.data, endpoint);
        if (!event) continue;
        drops = 0;
        if (event.id !== undefined) last = event.id;
        yield event;
        if (event.event === 'idle') return;
      }
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      if (err instanceof LongrunError) throw err;
      // The connection broke: reopened below, as a stream that ended.
    } finally {
      body.destroy();
    }
    // Ended without idle (a drain, a slow reader cut, a proxy's timeout): reopen where it stopped, on the next endpoint.
    drops += 1;
    next = deps.endpoints.indexOf(endpoint) + 1;
    const dropped = new LongrunError('NETWORK_ERROR', `the follow stream from ${endpoint} ended before idle`, { retryable: true, endpoint });
    await deps.clock.sleep(drops === 1 ? 0 : retryDelayMs(dropped, drops - 1, policy, () => deps.clock.random()), signal);
  }
}
