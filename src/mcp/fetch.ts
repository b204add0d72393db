/**
 * The HTTP side of one MCP session: the `fetch` the SDK's streamable-HTTP transport is
 * given. It keeps longrun's own rules around the SDK's requests:
 *
 * - only the server's origin is ever contacted (the SDK itself follows redirects only
 *   within the origin; this makes it a guarantee whatever the SDK does);
 * - the standalone SSE stream (the transport's only GET, as streams are never resumed:
 *   see session.ts) is answered 405 here and never opened: a run needs no server-initiated messages outside its requests, the
 *   owner's MCP server has no SSE (Workhorse sets DisableStandaloneSSE for that
 *   reason), and one idle stream per run and server would hold a connection each;
 * - the owner's and longrun's headers are set on every request (SDK protocol headers are
 *   never overridden);
 * - every request ends when the session is closed (`stop`), and a response body is
 *   capped, so a server cannot make longrun buffer without bound;
 * - with tracing on, a tool call's request carries that call's own `traceparent` header,
 *   the one its JSON-RPC message carries in `params._meta` (session.ts): the SDK gives no
 *   per-request headers, and one session serves calls at once.
 */
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { fetch as undiciFetch, type Dispatcher, type RequestInit as UndiciRequestInit } from 'undici';

/** Headers the MCP transport itself owns: configured headers never replace these. */
const PROTOCOL_HEADERS = new Set([
  'accept',
  'content-type',
  'content-length',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * How a tool call's traceparent is written in its message (session.ts puts `_meta` last in
 * `params`, and the SDK writes `jsonrpc` and `id` after `params`): the last occurrence in the
 * body is the call's own, whatever its arguments hold.
 */
const META_TRACEPARENT = '"_meta":{"traceparent":"';
const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The traceparent a JSON-RPC request body carries in its `params._meta`, if any. */
function messageTraceparent(body: string): string | undefined {
  const at = body.lastIndexOf(META_TRACEPARENT);
  if (at < 0) return undefined;
  const value = body.slice(at + META_TRACEPARENT.length, at + META_TRACEPARENT.length + 55);
  return TRACEPARENT.test(value) ? value : undefined;
}

/** Statuses whose response may not have a body (the Fetch standard's null-body statuses). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

export interface SessionFetchOptions {
  /** The only origin requests may go to. */
  origin: string;
  dispatcher: Dispatcher;
  /** Headers for every request, in order of precedence (later wins), computed per request. */
  headers(): Promise<Record<string, string>>;
  /** Aborts every request of the session (its close). */
  stop: AbortSignal;
  /** Largest response body read, in bytes. */
  bodyLimit: number;
  /** Tracing is on: a message's `params._meta.traceparent` is its request's traceparent header. */
  traced?: boolean;
}

class ResponseTooLargeError extends Error {
  constructor(limit: number) {
    super(`response body exceeded size limit (${limit} bytes)`);
    this.name = 'ResponseTooLargeError';
  }
}

function capped(response: Response, limit: number): Response {
  if (!response.body || NULL_BODY_STATUSES.has(response.status)) return response;
  let seen = 0;
  const body = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > limit) controller.error(new ResponseTooLargeError(limit));
        else controller.enqueue(chunk);
      },
    }),
  );
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** The fetch for one session's transport. */
export function sessionFetch(options: SessionFetchOptions): FetchLike {
  return async (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input.href);
    if (url.origin !== options.origin) throw new Error(`MCP request to ${url.origin} refused: only ${options.origin} may be contacted`);
    const method = (init?.method ?? 'GET').toUpperCase();
    // 405 is how a server says it has no standalone stream; the SDK then goes on without.
    if (method === 'GET') return new Response(null, { status: 405, statusText: 'Method Not Allowed' });
    const headers = new Headers(init?.headers);
    for (const [name, value] of Object.entries(await options.headers())) {
      if (!PROTOCOL_HEADERS.has(name.toLowerCase())) headers.set(name, value);
    }
    const traceparent = options.traced && typeof init?.body === 'string' ? messageTraceparent(init.body) : undefined;
    if (traceparent) headers.set('traceparent', traceparent);
    const signal = init?.signal ? AbortSignal.any([init.signal, options.stop]) : options.stop;
    const response = await undiciFetch(url, {
      ...(init as UndiciRequestInit),
      method,
      // A plain object: this undici's Headers is not the global (Node's bundled) one.
      headers: Object.fromEntries(headers),
      signal,
      // Redirects are the SDK's to follow (within the origin), never fetch's.
      redirect: init?.redirect ?? 'manual',
      dispatcher: options.dispatcher,
    });
    return capped(response as unknown as Response, options.bodyLimit);
  };
}
