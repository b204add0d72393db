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
 * - a tool call's request carries that call's own `traceparent` (`withCallHeaders`:
 *   the SDK gives no per-request headers, and the same session serves calls at once).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
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
 * Headers of the request a call makes, over the session's: set for the duration of one SDK
 * request (the SDK's send runs in the caller's async context, so its fetch sees them).
 */
const callHeaders = new AsyncLocalStorage<Readonly<Record<string, string>>>();

/** Runs `request` with `headers` added to the HTTP request it makes (a tool call's traceparent). */
export function withCallHeaders<T>(headers: Readonly<Record<string, string>> | undefined, request: () => Promise<T>): Promise<T> {
  return headers ? callHeaders.run(headers, request) : request();
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
}

export class ResponseTooLargeError extends Error {
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
    const own = callHeaders.getStore();
    for (const [name, value] of Object.entries(own ? { ...(await options.headers()), ...own } : await options.headers())) {
      if (!PROTOCOL_HEADERS.has(name.toLowerCase())) headers.set(name, value);
    }
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
