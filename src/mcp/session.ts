/**
 * One MCP client session: a run's connection to one server, on the official SDK's
 * Client and streamable-HTTP transport. Opened at the run's start (initialize), used to
 * list the server's tools and to call them, and closed when the run ends: the session is
 * ended on the server with the transport's DELETE, then every request still open is
 * aborted. `close()` is idempotent, never throws and is bounded in time.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ListToolsResultSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import type { Dispatcher } from 'undici';
import { version } from '../core/version';
import { deadline } from '../core/deadline';
import type { TraceHeaders } from '../observability/tracing';
import { sessionFetch } from './fetch';
import type { McpEndpoint } from './servers';

/**
 * One JSON Schema validator for every session: the SDK's Client builds an Ajv instance of
 * its own otherwise (milliseconds of CPU per run and server, for a validator longrun's
 * calls never use: results are taken as sent, see `callTool`).
 */
let validator: AjvJsonSchemaValidator | undefined;

/** A server that keeps answering with a next cursor is not listed forever. */
const MAX_TOOL_PAGES = 100;

export interface SessionOptions {
  dispatcher: Dispatcher;
  /** Headers for every request to the server (computed per request: the JWT is refreshed). */
  headers(): Promise<Record<string, string>>;
  /** Largest response body read, in bytes. */
  bodyLimit: number;
  /** Errors of the transport outside any request (e.g. a stream that broke). */
  onError(err: Error): void;
  /** Tracing is on: a tool call's traceparent is its request's header too (fetch.ts). */
  traced?: boolean;
}

/**
 * Runs one SDK request on a signal of its own that follows `signal` only until the request
 * is done. The SDK never removes the abort listener it adds to a request's signal: on a
 * shared signal (the discovery deadline) a later abort would "cancel" requests long
 * answered, sending the server a notifications/cancelled for each.
 */
async function within<T>(signal: AbortSignal, request: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const own = deadline(signal, undefined);
  try {
    return await request(own.signal);
  } finally {
    own.dispose();
  }
}

export class McpSession {
  private readonly client = new Client({ name: 'longrun', version }, { jsonSchemaValidator: (validator ??= new AjvJsonSchemaValidator()) });
  private readonly transport: StreamableHTTPClientTransport;
  /** Aborts every request of this session: its close. */
  private readonly stopper = new AbortController();
  private closing: Promise<void> | undefined;

  constructor(
    readonly endpoint: McpEndpoint,
    options: SessionOptions,
  ) {
    this.transport = new StreamableHTTPClientTransport(endpoint.url, {
      fetch: sessionFetch({
        origin: endpoint.url.origin,
        dispatcher: options.dispatcher,
        headers: options.headers,
        stop: this.stopper.signal,
        bodyLimit: options.bodyLimit,
        traced: options.traced ?? false,
      }),
      // Never reconnect a stream by itself: a run's requests have deadlines of their own.
      reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1_000, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1 },
    });
    this.client.onerror = options.onError;
  }

  /** Initializes the session. Rejects when the server cannot be reached or refuses. */
  async connect(signal: AbortSignal, timeoutMs: number): Promise<void> {
    await within(signal, (own) => this.client.connect(this.transport, { signal: own, timeout: timeoutMs }));
  }

  /** Every tool the server lists, following `nextCursor` until the last page. */
  async listTools(signal: AbortSignal, timeoutMs: number): Promise<Tool[]> {
    const tools: Tool[] = [];
    const cursors = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_TOOL_PAGES; page++) {
      const params = cursor === undefined ? {} : { cursor };
      const result = await within(signal, (own) => this.client.request({ method: 'tools/list', params }, ListToolsResultSchema, { signal: own, timeout: timeoutMs }));
      tools.push(...result.tools);
      cursor = result.nextCursor;
      if (cursor === undefined) return tools;
      if (cursors.has(cursor)) throw new Error(`tools/list repeated the cursor ${JSON.stringify(cursor)}`);
      cursors.add(cursor);
    }
    throw new Error(`tools/list did not end within ${MAX_TOOL_PAGES} pages`);
  }

  /**
   * Calls `name` (the server's own name for the tool). The result is taken as the server
   * sent it: `tools/call` is sent as a plain request, so the SDK does not hold a result
   * against the tool's output schema (only the first content item is used). `signal` is
   * the call's own (see `within`). `trace`, the call's span, goes in `params._meta` (the
   * MCP convention for trace context, last so fetch.ts finds it) and as its request's header.
   */
  callTool(name: string, args: Record<string, unknown>, signal: AbortSignal, timeoutMs: number, trace?: TraceHeaders): Promise<CallToolResult> {
    const params = trace ? { name, arguments: args, _meta: { ...trace } } : { name, arguments: args };
    return this.client.request({ method: 'tools/call', params }, CallToolResultSchema, { signal, timeout: timeoutMs });
  }

  /**
   * Ends the session: DELETE with its session id (when the server gave one), within
   * `boundMs`; then aborts whatever is still open and closes the client.
   */
  close(boundMs: number): Promise<void> {
    this.closing ??= (async () => {
      const bound = setTimeout(() => this.stopper.abort(), boundMs);
      try {
        await this.transport.terminateSession();
      } catch {
        // Best effort: a server that is gone or refuses lets its session expire.
      } finally {
        clearTimeout(bound);
        this.stopper.abort();
        await this.client.close().catch(() => undefined);
      }
    })();
    return this.closing;
  }
}
