/**
 * A simulated MCP server on the official SDK's server side: one SDK `Server` per
 * session behind the SDK's streamable-HTTP server transport, so sessions, JSON-RPC,
 * protocol versions and DELETE behave as a real server's do. The low-level `Server` (not
 * `McpServer`) is used because tests need what `McpServer` cannot do: a tool list served
 * in pages (`nextCursor`), results that break the rules (no content, an image first).
 *
 * Tools: `echo` (its arguments back, as JSON text), `fail` (a tool error), `slow` (answers
 * after `ms`), `empty` (no content), `image` (an image, then text), `large` (a text of
 * `bytes` bytes), `broken` (a JSON-RPC error instead of a result), plus `extraTools`
 * filler tools to make a list long. It records every JSON-RPC message, GET and DELETE
 * with its headers. `McpEndpointSimulator` is the endpoint alone (the owner simulator
 * serves it at /api/v4/mcp); `McpServerSimulator` is a server of its own on loopback.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import express from 'express';
import { RECORD_LIMIT, record } from './recorded';
import { waitForChange } from './wait-for';

export interface McpSimulatorOptions {
  /** Tools per tools/list page (default: every tool on one page). */
  pageSize?: number;
  /** Filler tools `tool_001`… added after the named ones. */
  extraTools?: number;
  /** Accept requests and never answer them: every request (`all`, a hung server) or only DELETE. */
  hang?: 'all' | 'delete';
  /** Answer 401 unless `Authorization: Bearer <token>`. */
  bearerToken?: string;
  /** Answer with JSON bodies (true, the default, as GitLab's MCP server does) or SSE streams. */
  jsonResponse?: boolean;
}

/** One JSON-RPC message received, with the headers of the request that carried it. */
export interface McpReceived {
  method: string;
  params: unknown;
  sessionId: string | undefined;
  headers: Record<string, string | string[] | undefined>;
}

/** A GET or DELETE received. */
export interface McpHttpReceived {
  sessionId: string | undefined;
  headers: Record<string, string | string[] | undefined>;
}

const ICON = { src: 'https://icons.example.invalid/echo.png', mimeType: 'image/png', sizes: ['48x48'] };
/** A 1×1 transparent PNG. */
const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';

const NAMED_TOOLS: Tool[] = [
  {
    name: 'echo',
    title: 'Echo',
    description: 'Answers with its arguments as JSON text.',
    inputSchema: { type: 'object', properties: { q: { type: 'string', description: 'What to echo' } } },
    annotations: { readOnlyHint: true, openWorldHint: false },
    icons: [ICON],
  },
  { name: 'fail', description: 'Always reports a tool error.', inputSchema: { type: 'object' } },
  { name: 'slow', description: 'Answers after `ms` milliseconds.', inputSchema: { type: 'object', properties: { ms: { type: 'integer' } }, required: ['ms'] } },
  { name: 'empty', description: 'Answers with no content.', inputSchema: { type: 'object' } },
  { name: 'image', description: 'Answers with an image, then text.', inputSchema: { type: 'object' } },
  { name: 'large', description: 'Answers with a text of `bytes` bytes.', inputSchema: { type: 'object', properties: { bytes: { type: 'integer' } } } },
  { name: 'broken', description: 'Answers with a JSON-RPC error.', inputSchema: { type: 'object' } },
];

function toolList(extra: number): Tool[] {
  const filler = Array.from({ length: extra }, (_, i): Tool => ({
    name: `tool_${String(i + 1).padStart(3, '0')}`,
    description: `Filler tool ${i + 1}.`,
    inputSchema: { type: 'object' },
  }));
  return [...NAMED_TOOLS, ...filler];
}

async function callTool(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<CallToolResult> {
  switch (name) {
    case 'echo':
      return { content: [{ type: 'text', text: JSON.stringify(args) }] };
    case 'fail':
      return { content: [{ type: 'text', text: 'tool failed on purpose' }], isError: true };
    case 'slow':
      await sleep(Number(args['ms'] ?? 1_000), undefined, { signal });
      return { content: [{ type: 'text', text: 'slow done' }] };
    case 'empty':
      return { content: [] };
    case 'image':
      return {
        content: [
          { type: 'image', data: PIXEL, mimeType: 'image/png' },
          { type: 'text', text: 'a pixel' },
        ],
      };
    case 'large':
      return { content: [{ type: 'text', text: 'x'.repeat(Number(args['bytes'] ?? 1024)) }] };
    case 'broken':
      throw new McpError(ErrorCode.InternalError, 'the tool broke on purpose');
    default:
      if (/^tool_\d+$/.test(name)) return { content: [{ type: 'text', text: name }] };
      throw new McpError(ErrorCode.InvalidParams, `unknown tool ${name}`);
  }
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The MCP endpoint: handles POST, GET and DELETE requests handed to it. */
export class McpEndpointSimulator {
  readonly received: McpReceived[] = [];
  readonly deletes: McpHttpReceived[] = [];
  readonly gets: McpHttpReceived[] = [];
  private readonly sessions = new Map<string, StreamableHTTPServerTransport>();
  private readonly held = new Set<http.ServerResponse>();
  private readonly events = new EventEmitter();
  private readonly tools: Tool[];

  constructor(private readonly options: McpSimulatorOptions = {}) {
    this.tools = toolList(options.extraTools ?? 0);
    this.events.setMaxListeners(0);
  }

  /** Sessions initialized and not yet ended. */
  get openSessions(): number {
    return this.sessions.size;
  }

  /** The tools/call messages received, as {name, arguments}. */
  get calls(): Array<{ name?: string; arguments?: unknown }> {
    return this.received.filter((r) => r.method === 'tools/call').map((r) => r.params as { name?: string; arguments?: unknown });
  }

  waitFor(predicate: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
    return waitForChange(this.events, 'mcp simulator', predicate, timeoutMs, what);
  }

  /** Handles one HTTP request; `body` is the parsed JSON body of a POST. */
  async handle(req: http.IncomingMessage, res: http.ServerResponse, body: unknown): Promise<void> {
    try {
      await this.dispatch(req, res, body);
    } finally {
      this.events.emit('change');
    }
  }

  private async dispatch(req: http.IncomingMessage, res: http.ServerResponse, body: unknown): Promise<void> {
    const headers = { ...req.headers };
    const sessionId = headerText(req.headers['mcp-session-id']);
    if (req.method === 'POST') {
      for (const message of Array.isArray(body) ? body : [body]) {
        const { method, params } = (message ?? {}) as { method?: string; params?: unknown };
        record(this.received, { method: method ?? '(response)', params, sessionId, headers }, RECORD_LIMIT);
      }
    } else if (req.method === 'DELETE') {
      record(this.deletes, { sessionId, headers }, RECORD_LIMIT);
    } else if (req.method === 'GET') {
      record(this.gets, { sessionId, headers }, RECORD_LIMIT);
    }
    // Seen now, before an answer that may take long (a slow tool, a held request).
    this.events.emit('change');
    if (this.options.hang === 'all' || (this.options.hang === 'delete' && req.method === 'DELETE')) {
      this.held.add(res);
      res.on('close', () => this.held.delete(res));
      return;
    }
    if (this.options.bearerToken !== undefined && req.headers.authorization !== `Bearer ${this.options.bearerToken}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_token' }));
      return;
    }
    if (req.method === 'GET') {
      // No standalone stream, as GitLab's MCP server.
      res.writeHead(405, { allow: 'POST, DELETE' }).end();
      return;
    }
    if (sessionId !== undefined) {
      const transport = this.sessions.get(sessionId);
      if (!transport) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
        return;
      }
      await transport.handleRequest(req, res, body);
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(400).end();
      return;
    }
    await this.newSession().handleRequest(req, res, body);
  }

  /** A session's SDK server and transport; kept by its id once initialized. */
  private newSession(): StreamableHTTPServerTransport {
    const server = new Server({ name: 'longrun-mcp-sim', version: '1.0.0' }, { capabilities: { tools: {} } });
    const pageSize = this.options.pageSize ?? this.tools.length;
    server.setRequestHandler(ListToolsRequestSchema, (request) => {
      const start = request.params?.cursor === undefined ? 0 : Number(request.params.cursor);
      if (!Number.isInteger(start) || start < 0 || start > this.tools.length) throw new McpError(ErrorCode.InvalidParams, 'invalid cursor');
      const end = start + pageSize;
      return { tools: this.tools.slice(start, end), ...(end < this.tools.length ? { nextCursor: String(end) } : {}) };
    });
    server.setRequestHandler(CallToolRequestSchema, (request, extra) => callTool(request.params.name, request.params.arguments ?? {}, extra.signal));
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: this.options.jsonResponse ?? true,
      onsessioninitialized: (id) => void this.sessions.set(id, transport),
      onsessionclosed: (id) => void this.sessions.delete(id),
    });
    void server.connect(transport);
    return transport;
  }

  /** Ends every session and every held request. */
  async close(): Promise<void> {
    for (const res of this.held) res.destroy();
    await Promise.allSettled([...this.sessions.values()].map((transport) => transport.close()));
    this.sessions.clear();
  }
}

/** An MCP server of its own on loopback, serving the endpoint at /mcp. */
export class McpServerSimulator {
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly server: http.Server,
    readonly endpoint: McpEndpointSimulator,
    readonly url: string,
  ) {}

  static async start(options: McpSimulatorOptions = {}): Promise<McpServerSimulator> {
    const endpoint = new McpEndpointSimulator(options);
    const app = express();
    app.use(express.json({ limit: '16mb' }));
    app.all('/mcp', (req, res, next) => void endpoint.handle(req, res, req.body).catch(next));
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    return new McpServerSimulator(server, endpoint, `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
  }

  get received(): McpReceived[] {
    return this.endpoint.received;
  }

  get deletes(): McpHttpReceived[] {
    return this.endpoint.deletes;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.endpoint.close();
      await new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        this.server.closeAllConnections();
      });
    })();
    return this.closing;
  }
}
