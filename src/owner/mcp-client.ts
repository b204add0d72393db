/**
 * runMCPTool (SPEC §4): performed on the owner-configured MCP server that lists the tool,
 * over MCP's streamable HTTP transport — initialize once per run and server, then
 * tools/call. JSON and text/event-stream answers are both read; the tool's text content
 * is the plainTextResponse. Never throws: failures are answered as errors.
 */
import { request } from 'undici';
import { deadline } from './deadline';
import type { McpServer } from './preauth';
import { version } from '../version';

const PROTOCOL_VERSION = '2025-03-26';
/** The answer must fit, with its envelope, in one 4 MiB gRPC message. */
const RESULT_LIMIT = 4 * 1024 * 1024 - 4 * 1024;

export type McpResult = { ok: true; text: string } | { ok: false; error: string };

interface JsonRpcResponse {
  id?: number | string;
  result?: { content?: Array<{ type?: string; text?: string }>; isError?: boolean };
  error?: { code?: number; message?: string };
}

/** Picks the server whose tool list names `tool`. */
export function findMcpServer(servers: Record<string, McpServer> | null | undefined, tool: string): McpServer | undefined {
  return Object.values(servers ?? {}).find((server) => server.URL && (server.Tools ?? []).includes(tool));
}

function parseAnswer(contentType: string, text: string, id: number): JsonRpcResponse | undefined {
  if (contentType.includes('text/event-stream')) {
    for (const event of text.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n');
      if (!data) continue;
      try {
        const message = JSON.parse(data) as JsonRpcResponse;
        if (message.id === id) return message;
      } catch {
        // not JSON-RPC: skip the event
      }
    }
    return undefined;
  }
  return JSON.parse(text) as JsonRpcResponse;
}

/** One run's MCP sessions: initialized lazily, one per server URL. */
export class McpSessions {
  private readonly sessions = new Map<string, Promise<string | undefined>>();
  private nextId = 1;

  constructor(private readonly timeoutMs: number) {}

  private async post(server: McpServer, body: object, sessionId: string | undefined, signal: AbortSignal): Promise<{ status: number; contentType: string; text: string; sessionId: string | undefined }> {
    const limit = deadline(signal, this.timeoutMs);
    try {
      return await this.postWithin(server, body, sessionId, limit.signal);
    } finally {
      limit.dispose();
    }
  }

  private async postWithin(server: McpServer, body: object, sessionId: string | undefined, signal: AbortSignal): Promise<{ status: number; contentType: string; text: string; sessionId: string | undefined }> {
    const res = await request(server.URL as string, {
      method: 'POST',
      headers: {
        ...server.Headers,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'user-agent': `longrun/${version}`,
        'mcp-protocol-version': PROTOCOL_VERSION,
        ...(sessionId ? { 'mcp-session-id': sessionId } : {}),
      },
      body: JSON.stringify(body),
      signal,
    });
    const text = await res.body.text();
    if (text.length > RESULT_LIMIT) throw new Error(`response body exceeded size limit (${RESULT_LIMIT} bytes)`);
    const header = res.headers['mcp-session-id'];
    return { status: res.statusCode, contentType: String(res.headers['content-type'] ?? ''), text, sessionId: Array.isArray(header) ? header[0] : header };
  }

  private session(server: McpServer, signal: AbortSignal): Promise<string | undefined> {
    const key = server.URL as string;
    let session = this.sessions.get(key);
    if (!session) {
      session = (async () => {
        const id = this.nextId++;
        const init = await this.post(
          server,
          { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'longrun', version } } },
          undefined,
          signal,
        );
        if (init.status !== 200) throw new Error(`initialize answered ${init.status}`);
        const answer = parseAnswer(init.contentType, init.text, id);
        if (!answer || answer.error) throw new Error(`initialize failed: ${answer?.error?.message ?? 'no answer'}`);
        await this.post(server, { jsonrpc: '2.0', method: 'notifications/initialized' }, init.sessionId, signal);
        return init.sessionId;
      })();
      // A failed initialize is retried by the next call rather than cached.
      session.catch(() => this.sessions.delete(key));
      this.sessions.set(key, session);
    }
    return session;
  }

  async callTool(server: McpServer, name: string, argsJson: string | undefined, signal: AbortSignal): Promise<McpResult> {
    let args: unknown = {};
    try {
      args = argsJson ? JSON.parse(argsJson) : {};
    } catch {
      return { ok: false, error: 'tool arguments are not valid JSON' };
    }
    try {
      const sessionId = await this.session(server, signal);
      const id = this.nextId++;
      const res = await this.post(server, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }, sessionId, signal);
      if (res.status !== 200) return { ok: false, error: `mcp server answered ${res.status}` };
      const answer = parseAnswer(res.contentType, res.text, id);
      if (!answer) return { ok: false, error: 'mcp server gave no answer' };
      if (answer.error) return { ok: false, error: `mcp error: ${answer.error.message ?? answer.error.code ?? 'unknown'}` };
      const text = (answer.result?.content ?? [])
        .filter((c) => c.type === 'text' && typeof c.text === 'string')
        .map((c) => c.text)
        .join('\n');
      return answer.result?.isError ? { ok: false, error: text || 'tool failed' } : { ok: true, text };
    } catch (err) {
      if (signal.aborted) return { ok: false, error: 'request aborted' };
      return { ok: false, error: `mcp request failed: ${(err as Error).message}` };
    }
  }
}
