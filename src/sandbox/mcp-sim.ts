/**
 * A simulated MCP server (streamable HTTP, JSON answers) for runMCPTool: tools `echo`
 * (returns its arguments as text), `fail` (isError) and `slow` (answers after args.ms).
 * It records every JSON-RPC request with its headers.
 */
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import express from 'express';

export interface McpReceived {
  method: string;
  params: unknown;
  headers: Record<string, string | string[] | undefined>;
}

export class McpServerSimulator {
  readonly received: McpReceived[] = [];
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(): Promise<McpServerSimulator> {
    const app = express();
    app.use(express.json());
    let sim: McpServerSimulator | undefined;
    const sessions = new Set<string>();
    app.post('/mcp', (req, res) => {
      const body = req.body as { id?: number; method: string; params?: { name?: string; arguments?: Record<string, unknown> } };
      sim?.received.push({ method: body.method, params: body.params, headers: { ...req.headers } });
      if (body.method === 'initialize') {
        const session = randomUUID();
        sessions.add(session);
        res.setHeader('mcp-session-id', session);
        res.json({ jsonrpc: '2.0', id: body.id, result: { protocolVersion: '2025-03-26', capabilities: { tools: {} }, serverInfo: { name: 'sim', version: '1' } } });
        return;
      }
      if (!sessions.has(String(req.get('mcp-session-id')))) {
        res.status(404).json({ jsonrpc: '2.0', id: body.id ?? null, error: { code: -32001, message: 'session not found' } });
        return;
      }
      if (body.method === 'notifications/initialized') {
        res.status(202).end();
        return;
      }
      if (body.method !== 'tools/call') {
        res.json({ jsonrpc: '2.0', id: body.id, error: { code: -32601, message: 'method not found' } });
        return;
      }
      const args = body.params?.arguments ?? {};
      const answer = (result: object): void => void res.json({ jsonrpc: '2.0', id: body.id, result });
      switch (body.params?.name) {
        case 'echo':
          answer({ content: [{ type: 'text', text: JSON.stringify(args) }] });
          return;
        case 'fail':
          answer({ content: [{ type: 'text', text: 'tool failed on purpose' }], isError: true });
          return;
        case 'slow':
          setTimeout(() => answer({ content: [{ type: 'text', text: 'slow done' }] }), Number(args['ms'] ?? 1_000));
          return;
        default:
          res.json({ jsonrpc: '2.0', id: body.id, error: { code: -32602, message: `unknown tool ${body.params?.name}` } });
      }
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    sim = new McpServerSimulator(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
    return sim;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
