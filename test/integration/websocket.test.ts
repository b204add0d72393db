/**
 * The WebSocket route (docs/spec.md §11, as Workhorse's websocket.go and runner.go serve
 * it), through a real gateway, the simulators and a real redis-server, with `ws` clients:
 * what is refused before the upgrade (a plain GET, the owner's denial, a foreign Origin,
 * the cap), a session's frames both ways (the start rewritten, actions for the client as
 * binary protojson frames, its answers passed on, what the gateway serves itself), and
 * every way a session ends — with its close code, the stop the service received, and
 * nothing left behind (lock, run, socket).
 */
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { request } from 'undici';
import { lockKey } from '../../src/redis/keys';
import { WEBSOCKET_PREAUTH } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import type { CallRecord } from '../../sandbox/workflow-sim';
import { McpServerSimulator } from '../../sandbox/mcp-sim';
import { metricValue, startStack, type Stack, type StackOptions } from '../../stack';

let stack: Stack | undefined;
const clients: WebSocket[] = [];

const mcpSims: McpServerSimulator[] = [];

afterEach(async () => {
  for (const ws of clients.splice(0)) ws.terminate();
  await stack?.close();
  stack = undefined;
  await Promise.all(mcpSims.splice(0).map((m) => m.close()));
});

const FAST = {
  LONGRUN_WS_PING_MS: '100',
  LONGRUN_WS_PONG_TIMEOUT_MS: '400',
  LONGRUN_WS_CLOSE_TIMEOUT_MS: '500',
  LONGRUN_WS_START_TIMEOUT_MS: '1500',
  LONGRUN_STOP_ACK_TIMEOUT_MS: '2000',
  // Workhorse's behaviour (docs/spec.md §11): a lost connection ends the run. §12 is websocket-resume.test.ts.
  LONGRUN_WS_RESUME_WINDOW_MS: '0',
};

async function wsStack(options: StackOptions = {}): Promise<Stack> {
  stack = await startStack({ redis: 'own', preauth: { lockConcurrentFlow: true }, ...options, env: { ...FAST, ...options.env } });
  return stack;
}

interface Session {
  ws: WebSocket;
  /** Every frame from the gateway, parsed, with whether it was binary. */
  frames: Array<{ binary: boolean; json: Record<string, unknown> }>;
  closed: Promise<{ code: number; reason: string }>;
  send(event: unknown): void;
  /** Resolves with the first frame carrying `kind`. */
  next(kind: string): Promise<Record<string, unknown>>;
}

function open(s: Stack, options: WebSocket.ClientOptions & { query?: string } = {}): Promise<Session> {
  const ws = new WebSocket(`${s.url.replace('http', 'ws')}/api/v4/ai/duo_workflows/ws${options.query ?? ''}`, options);
  clients.push(ws);
  const frames: Session['frames'] = [];
  const waiters: Array<() => void> = [];
  ws.on('message', (data: Buffer, binary: boolean) => {
    frames.push({ binary, json: JSON.parse(data.toString('utf8')) as Record<string, unknown> });
    for (const wake of waiters.splice(0)) wake();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  const session: Session = {
    ws,
    frames,
    closed,
    send: (event) => ws.send(JSON.stringify(event)),
    next: async (kind) => {
      for (;;) {
        const found = frames.find((f) => f.json[kind] !== undefined && f.json[kind] !== null);
        if (found) return found.json;
        await new Promise<void>((resolve, reject) => {
          waiters.push(resolve);
          ws.once('close', () => reject(new Error(`closed before a ${kind} frame`)));
        });
      }
    },
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(session));
    ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode, res })));
    ws.once('error', reject);
  });
}

/** The refusal of an upgrade: its status, headers and body. */
async function refused(s: Stack, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  try {
    await open(s, { headers });
  } catch (err) {
    const { status, res } = err as { status: number; res: NodeJS.ReadableStream & { headers: Record<string, unknown> } };
    let body = '';
    for await (const chunk of res) body += String(chunk);
    return { status, headers: res.headers, body };
  }
  throw new Error('the upgrade was not refused');
}

const start = (workflowID: string, steps: Step[], extra: Record<string, unknown> = {}) => ({
  startRequest: { workflowID, goal: 'ws goal', workflowMetadata: scenarioMetadata(steps), ...extra },
});

async function callOf(s: Stack, id: string): Promise<CallRecord> {
  await s.workflow.waitFor(() => s.workflow.callsFor(id).length > 0, 10_000, `a call of ${id}`);
  return s.workflow.callsFor(id)[0] as CallRecord;
}

async function nothingLeft(s: Stack, id: string): Promise<void> {
  await expect.poll(() => s.gateway.registry.size, { timeout: 5_000 }).toBe(0);
  expect(await s.client?.exists(lockKey(id))).toBe(0);
}

describe('before the upgrade', () => {
  it('a plain GET is 400 INVALID_REQUEST', async () => {
    const s = await wsStack();
    const res = await request(`${s.url}/api/v4/ai/duo_workflows/ws`);
    expect(res.statusCode).toBe(400);
    expect(((await res.body.json()) as { error: { code: string } }).error.code).toBe('INVALID_REQUEST');
  });

  it("the owner's denial is passed through: status, headers, body; preauth asked as GET with path and query", async () => {
    const s = await wsStack();
    s.owner.configure(WEBSOCKET_PREAUTH, { deny: { status: 401, body: '{"message":"401 Unauthorized"}', headers: { 'WWW-Authenticate': 'Bearer realm="gitlab"' } } });
    const res = await refused(s, { authorization: 'Bearer user-token' });
    expect(res).toMatchObject({ status: 401, body: '{"message":"401 Unauthorized"}' });
    expect(res.headers['www-authenticate']).toBe('Bearer realm="gitlab"');
    expect(res.headers['x-longrun-error-code']).toBe('PREAUTH_DENIED');
    const preauth = s.owner.preauths.at(-1);
    expect(preauth).toMatchObject({ method: 'GET', path: '/api/v4/ai/duo_workflows/ws' });
    expect(preauth?.headers['authorization']).toBe('Bearer user-token');
    expect(s.workflow.calls).toEqual([]);
  });

  it('a page of another site is 403 FORBIDDEN_ORIGIN before the upgrade; its own host, a listed origin and no Origin are upgraded', async () => {
    const s = await wsStack({ env: { LONGRUN_WS_ALLOWED_ORIGINS: 'https://ide.example.com' } });
    const host = new URL(s.url).host;
    const res = await refused(s, { origin: 'https://evil.example.net' });
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'FORBIDDEN_ORIGIN' } });
    expect(s.owner.preauths).toEqual([]);
    for (const origin of [`http://${host}`, 'https://ide.example.com', undefined]) {
      const session = await open(s, origin ? { origin } : {});
      expect(session.ws.protocol).toBe('');
      session.ws.close(1000);
      await session.closed;
    }
  });

  it('over LONGRUN_MAX_WS_SESSIONS: 503 CAPACITY_EXHAUSTED with Retry-After, before any preauth', async () => {
    const s = await wsStack({ env: { LONGRUN_MAX_WS_SESSIONS: '1' } });
    await open(s);
    const preauths = s.owner.preauths.length;
    const res = await refused(s);
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('5');
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'CAPACITY_EXHAUSTED' } });
    expect(s.owner.preauths.length).toBe(preauths);
  });
});

describe('a session', () => {
  it('the start rewritten as Workhorse does; client-bound actions as binary protojson frames; answers passed on; the relay served; 1000 at the end', async () => {
    const s = await wsStack({ preauth: { lockConcurrentFlow: true, serverCapabilities: ['advanced_search', 'not_allowed', 'tool_call_approval'] } });
    const session = await open(s, { headers: { 'user-agent': 'gitlab-language-server 7.0', 'x-gitlab-client-name': 'gitlab-lsp' } });
    const id = '5001';
    session.send(
      start(
        id,
        [
          { op: 'checkpoint', text: 'thinking' },
          { op: 'http', path: '/api/v4/projects/1' },
          { op: 'client', action: { runReadFile: { filepath: 'README.md' } }, expect: { plainTextResponse: { response: '# readme' } } },
          { op: 'end' },
        ],
        { clientCapabilities: ['shell_command', 'made_up', 'incremental_streaming'], mcpTools: [{ name: 'local_tool', description: 'the client’s own' }] },
      ),
    );
    const read = await session.next('runReadFile');
    const frame = session.frames.find((f) => f.json['runReadFile']);
    expect(frame?.binary).toBe(true);
    // Proto names, unpopulated fields emitted: the ndjson marshaling.
    expect(read).toMatchObject({ requestID: expect.any(String), runReadFile: { filepath: 'README.md' } });
    session.send({ actionResponse: { requestID: read['requestID'], plainTextResponse: { response: '# readme' } } });
    expect(await session.closed).toEqual({ code: 1000, reason: '' });
    const call = await callOf(s, id);
    expect(call.startRequest.clientCapabilities).toEqual(['incremental_streaming', 'shell_command', 'advanced_search', 'tool_call_approval']);
    expect(call.startRequest.mcpTools?.map((t) => t.name)).toEqual(['local_tool']);
    expect(call.metadata['x-gitlab-client-name']).toBe('gitlab-lsp');
    expect(call.ended?.how).toBe('ok');
    expect(call.protocolErrors).toEqual([]);
    // The relay was the gateway's: the owner saw it; the client saw only its own action and the checkpoint.
    expect(s.owner.apiRequests.map((r) => r.path)).toContain('/api/v4/projects/1');
    expect(session.frames.map((f) => Object.keys(f.json).find((k) => k !== 'requestID'))).toEqual(['newCheckpoint', 'runReadFile']);
    expect(session.frames[0]?.json).toMatchObject({ newCheckpoint: { checkpoint: 'thinking', errors: [], agent_context_usage: expect.any(Object) } });
    await nothingLeft(s, id);
    const metrics = await s.metrics();
    expect(metricValue(metrics, 'longrun_connections_total', { transport: 'websocket' })).toBe(1);
    expect(metricValue(metrics, 'longrun_teardowns_total', { transport: 'websocket', reason: 'finished' })).toBe(1);
    expect(metricValue(metrics, 'longrun_websocket_frames_total', { direction: 'out' })).toBe(2);
    expect(metricValue(metrics, 'longrun_websocket_frames_total', { direction: 'in' })).toBe(2);
  });

  it("the owner's MCP tools are appended to the client's and served by the gateway; a tool of the client's own goes to the client", async () => {
    const mcp = await McpServerSimulator.start();
    mcpSims.push(mcp);
    const s = await wsStack({
      env: { LONGRUN_MCP_ALLOW_PRIVATE: 'true' },
      preauth: { lockConcurrentFlow: true, mcpServers: { sim: { URL: mcp.url, Tools: ['echo'], PreApprovedTools: ['echo'] } } },
    });
    const session = await open(s);
    session.send(
      start(
        '5050',
        [
          { op: 'mcp', name: 'sim_echo', args: '{"q":"served here"}' },
          { op: 'client', action: { runMCPTool: { name: 'local_tool', args: '{}' } }, expect: { plainTextResponse: { response: 'from the IDE' } } },
          { op: 'end' },
        ],
        { mcpTools: [{ name: 'local_tool' }], preapproved_tools: ['local_tool'] },
      ),
    );
    const local = await session.next('runMCPTool');
    expect(local).toMatchObject({ runMCPTool: { name: 'local_tool' } });
    session.send({ actionResponse: { requestID: local['requestID'], plainTextResponse: { response: 'from the IDE' } } });
    expect(await session.closed).toEqual({ code: 1000, reason: '' });
    const call = await callOf(s, '5050');
    expect(call.startRequest.mcpTools?.map((t) => t.name)).toEqual(['local_tool', 'sim_echo']);
    expect(call.startRequest.preapproved_tools).toEqual(['local_tool', 'sim_echo']);
    expect(call.protocolErrors).toEqual([]);
    // Only the client's own tool reached the client; the owner's was called by the gateway.
    expect(session.frames.filter((f) => f.json['runMCPTool'])).toHaveLength(1);
    expect(mcp.endpoint.calls.map((c) => c.name)).toEqual(['echo']);
    // The run's MCP session ended with it.
    await expect.poll(() => mcp.endpoint.openSessions, { timeout: 5_000 }).toBe(0);
  });

  it("a later startRequest (no lock) carries the owner's MCP tools after the client's, as the first did (Workhorse re-appends them to every start)", async () => {
    const mcp = await McpServerSimulator.start();
    mcpSims.push(mcp);
    const s = await wsStack({
      env: { LONGRUN_MCP_ALLOW_PRIVATE: 'true' },
      preauth: { lockConcurrentFlow: false, mcpServers: { sim: { URL: mcp.url, Tools: ['echo'], PreApprovedTools: ['echo'] } } },
    });
    const session = await open(s);
    session.send(start('5052', [{ op: 'checkpoint', text: 'first turn' }, { op: 'hang' }], { mcpTools: [{ name: 'local_tool' }], preapproved_tools: ['local_tool'] }));
    await session.next('newCheckpoint');
    session.send(start('5052', [], { goal: 'and then', mcpTools: [{ name: 'other_tool' }], preapproved_tools: [] }));
    const call = await callOf(s, '5052');
    await s.workflow.waitFor(() => call.laterStarts.length === 1, 5_000, 'the second start');
    expect(call.laterStarts[0]?.mcpTools?.map((t) => t.name)).toEqual(['other_tool', 'sim_echo']);
    expect(call.laterStarts[0]?.preapproved_tools).toEqual(['sim_echo']);
    expect(call.laterStarts[0]?.workflowID).toBe('5052');
    session.ws.close(1000);
    await session.closed;
  });

  it('Redis down: a session with LockConcurrentFlow runs without the lock (Workhorse parity)', async () => {
    stack = await startStack({
      redis: { url: 'redis://127.0.0.1:1' },
      preauth: { lockConcurrentFlow: true },
      env: { ...FAST, LONGRUN_REDIS_CONNECT_TIMEOUT_MS: '200', LONGRUN_REDIS_COMMAND_TIMEOUT_MS: '200' },
    });
    const session = await open(stack);
    session.send(start('5051', [{ op: 'checkpoint', text: 'unlocked' }, { op: 'end' }]));
    expect(await session.closed).toEqual({ code: 1000, reason: '' });
    expect(session.frames.map((f) => (f.json['newCheckpoint'] as { checkpoint: string }).checkpoint)).toEqual(['unlocked']);
    expect(metricValue(await stack.metrics(), 'longrun_unlocked_runs_total')).toBe(1);
  });

  it('the lock held by another session: 1013 `Failed to acquire lock on workflow`, no start sent', async () => {
    const s = await wsStack();
    const first = await open(s);
    first.send(start('5002', [{ op: 'checkpoint', text: 'holding' }, { op: 'hang' }]));
    await first.next('newCheckpoint');
    const second = await open(s);
    second.send(start('5002', [{ op: 'end' }]));
    expect(await second.closed).toEqual({ code: 1013, reason: 'Failed to acquire lock on workflow' });
    expect(s.workflow.callsFor('5002')).toHaveLength(1);
    first.ws.close(1000);
    await first.closed;
    await nothingLeft(s, '5002');
  });

  it('the client closes 1000 or 1001: the service is sent WORKHORSE_WEBSOCKET_CLOSE_<code>; the lock is released', async () => {
    const s = await wsStack();
    for (const [id, code] of [
      ['5003', 1000],
      ['5004', 1001],
    ] as const) {
      const session = await open(s);
      session.send(start(id, [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
      await session.next('newCheckpoint');
      session.ws.close(code);
      await session.closed;
      const call = await callOf(s, id);
      await s.workflow.waitFor(() => call.ended !== undefined, 5_000, `${id} ended`);
      expect(call.stopReasons).toEqual([`WORKHORSE_WEBSOCKET_CLOSE_${code}`]);
      await nothingLeft(s, id);
    }
    const metrics = await s.metrics();
    expect(metricValue(metrics, 'longrun_teardowns_total', { transport: 'websocket', reason: 'client_closed' })).toBe(2);
  });

  it('a connection lost without a close frame, or closed with another code: the call is cancelled, no stop', async () => {
    const s = await wsStack();
    const lost = await open(s);
    lost.send(start('5005', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await lost.next('newCheckpoint');
    lost.ws.terminate();
    const other = await open(s);
    other.send(start('5006', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await other.next('newCheckpoint');
    other.ws.close(4000, 'client says so');
    for (const id of ['5005', '5006']) {
      const call = await callOf(s, id);
      await s.workflow.waitFor(() => call.ended !== undefined, 5_000, `${id} ended`);
      expect(call).toMatchObject({ stopReasons: [], ended: { how: 'cancelled' } });
      await nothingLeft(s, id);
    }
  });

  it('a client that answers no ping: WORKHORSE_WEBSOCKET_PONG_TIMEOUT, the socket cut off', async () => {
    const s = await wsStack();
    const session = await open(s, { autoPong: false });
    session.send(start('5007', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await session.next('newCheckpoint');
    expect((await session.closed).code).toBe(1006);
    const call = await callOf(s, '5007');
    await s.workflow.waitFor(() => call.ended !== undefined, 5_000, 'ended');
    expect(call.stopReasons).toEqual(['WORKHORSE_WEBSOCKET_PONG_TIMEOUT']);
    // Workhorse's word, and as for Workhorse a user stop on today's service (off its
    // allowlist): the call ends OK and the workflow is stopped. With a resume window the
    // run parks instead (websocket-resume.test.ts).
    expect(call.ended).toMatchObject({ how: 'ok' });
    expect(s.workflow.stoppedWorkflows.has('5007')).toBe(true);
    await nothingLeft(s, '5007');
  });

  it('the service ends the call: INVALID_ARGUMENT → 4400 with its message cut to 123 bytes; quota → 1008; UNAVAILABLE → 1001', async () => {
    const s = await wsStack();
    const long = `bad goal: ${'é'.repeat(100)}`;
    const cases: Array<[string, Step, { code: number; reason: string }]> = [
      ['5008', { op: 'fail', code: 'INVALID_ARGUMENT', message: long }, { code: 4400, reason: Buffer.from(long).subarray(0, 122).toString() }],
      ['5009', { op: 'fail', code: 'RESOURCE_EXHAUSTED', message: 'USAGE_QUOTA_EXCEEDED: no credits' }, { code: 1008, reason: 'Insufficient credits: quota exceeded' }],
      ['5010', { op: 'fail', code: 'UNAVAILABLE', message: 'going away' }, { code: 1001, reason: 'duo workflow service unavailable' }],
      ['5011', { op: 'fail', code: 'INTERNAL', message: 'boom' }, { code: 1000, reason: '' }],
    ];
    for (const [id, step, close] of cases) {
      const session = await open(s);
      session.send(start(id, [{ op: 'checkpoint', text: 'a' }, step]));
      expect(await session.closed, id).toEqual(close);
      expect(Buffer.byteLength(close.reason)).toBeLessThanOrEqual(123);
      await nothingLeft(s, id);
    }
  });

  it('bad input: a first frame that is no start is 4400; an undecodable frame 1000 (Workhorse) and the call cancelled; a frame over 4 MiB 1009', async () => {
    const s = await wsStack();
    const noStart = await open(s);
    noStart.send({ heartbeat: { timestamp: '1' } });
    expect(await noStart.closed).toEqual({ code: 4400, reason: 'the first event must be startRequest' });

    const garbled = await open(s);
    garbled.send(start('5012', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await garbled.next('newCheckpoint');
    garbled.ws.send('{not json');
    expect((await garbled.closed).code).toBe(1000);
    const call = await callOf(s, '5012');
    await s.workflow.waitFor(() => call.ended !== undefined, 5_000, 'ended');
    expect(call).toMatchObject({ stopReasons: [], ended: { how: 'cancelled' } });
    await nothingLeft(s, '5012');

    const noWorkflow = await open(s);
    noWorkflow.send({ startRequest: { goal: 'which workflow?' } });
    expect(await noWorkflow.closed).toEqual({ code: 4400, reason: 'startRequest names no workflowID' });

    const huge = await open(s);
    huge.ws.send(Buffer.alloc(4 * 1024 * 1024 + 1, 0x20));
    expect((await huge.closed).code).toBe(1009);
    expect(s.workflow.callsFor('5013')).toEqual([]);
  });

  it('the drain: WORKHORSE_SERVER_SHUTDOWN to the service and 1001 `server shutdown` to the client; an idle session too', async () => {
    const s = await wsStack();
    const running = await open(s);
    running.send(start('5014', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await running.next('newCheckpoint');
    const idle = await open(s);
    const draining = s.gateway.drain();
    expect(await running.closed).toEqual({ code: 1001, reason: 'server shutdown' });
    expect(await idle.closed).toEqual({ code: 1001, reason: 'server shutdown' });
    await draining;
    expect((await callOf(s, '5014')).stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    expect(await s.client?.exists(lockKey('5014'))).toBe(0);
  });

  it('a preauth that names a WorkflowID: a start for another workflow is 4400, nothing started', async () => {
    const s = await wsStack();
    s.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, websocketWorkflowId: '5040' });
    const session = await open(s);
    session.send(start('5041', [{ op: 'end' }]));
    expect(await session.closed).toEqual({ code: 4400, reason: 'workflowID "5041" does not match the authorized workflow' });
    expect(s.workflow.calls).toEqual([]);
    const allowed = await open(s);
    allowed.send(start('5040', [{ op: 'checkpoint', text: 'ok' }, { op: 'end' }]));
    expect(await allowed.closed).toEqual({ code: 1000, reason: '' });
  });

  it('/runs lists a session with transport websocket while it runs', async () => {
    const s = await wsStack();
    const session = await open(s);
    session.send(start('5015', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await session.next('newCheckpoint');
    const { runs } = (await (await request(`${s.opsUrl}/runs`)).body.json()) as { runs: Array<Record<string, unknown>> };
    expect(runs).toEqual([expect.objectContaining({ workflow_id: '5015', transport: 'websocket', state: 'running' })]);
    session.ws.close(1000);
    await session.closed;
    await nothingLeft(s, '5015');
  });

  describe('clients', () => {
    it('like the language server: its headers reach the service, its heartbeats (every 60 s, scaled) and its own pings go through, the session ends 1000', async () => {
      const s = await wsStack();
      const session = await open(s, {
        headers: {
          authorization: 'Bearer glpat-language-server',
          'x-gitlab-language-server-version': '7.21.0',
          'x-gitlab-client-type': 'node-websocket',
          'x-gitlab-client-name': 'gitlab-language-server',
          'x-gitlab-client-version': '7.21.0',
          'user-agent': 'gitlab-language-server/7.21.0',
        },
      });
      session.send(start('5030', [{ op: 'checkpoint', text: 'a' }, { op: 'wait', ms: 600 }, { op: 'checkpoint', text: 'b' }, { op: 'end' }]));
      // The language server's heartbeat (60 s) and ping (45 s), scaled to 100 ms and 150 ms.
      const heartbeat = setInterval(() => session.send({ heartbeat: { timestamp: String(Date.now()) } }), 100);
      const ping = setInterval(() => session.ws.ping(), 150);
      try {
        expect(await session.closed).toEqual({ code: 1000, reason: '' });
      } finally {
        clearInterval(heartbeat);
        clearInterval(ping);
      }
      const call = await callOf(s, '5030');
      expect(call.heartbeats).toBeGreaterThanOrEqual(3);
      expect(call.metadata['x-gitlab-client-name']).toBe('gitlab-language-server');
      expect(call.metadata['x-gitlab-client-version']).toBe('7.21.0');
      expect(s.owner.preauths.at(-1)?.headers['x-gitlab-language-server-version']).toBe('7.21.0');
      expect(s.owner.preauths.at(-1)?.headers['authorization']).toBe('Bearer glpat-language-server');
      expect(session.frames.map((f) => (f.json['newCheckpoint'] as { checkpoint: string }).checkpoint)).toEqual(['a', 'b']);
    });

    it('like the web chat: client_type=browser in the preauth query, the lock on; a second startRequest under the lock is 1013', async () => {
      const s = await wsStack();
      const session = await open(s, { query: '?client_type=browser' });
      // The preauth is asked with the route's path and the client's query, as Workhorse asks Rails.
      expect(s.owner.preauths.at(-1)).toMatchObject({ method: 'GET', path: '/api/v4/ai/duo_workflows/ws?client_type=browser' });
      session.send(start('5031', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
      await session.next('newCheckpoint');
      session.send(start('5031', [{ op: 'end' }]));
      expect(await session.closed).toEqual({ code: 1013, reason: 'Failed to acquire lock on workflow' });
      const call = await callOf(s, '5031');
      await s.workflow.waitFor(() => call.ended !== undefined, 5_000, 'ended');
      expect(call.stopReasons).toEqual([]);
      expect(s.workflow.callsFor('5031')).toHaveLength(1);
      await nothingLeft(s, '5031');
    });

    it('a client that opens and never sends is closed 1008 after the start timeout; one that floods heartbeats is closed 1008 and its call cancelled', async () => {
      const s = await wsStack();
      const silent = await open(s);
      expect(await silent.closed).toEqual({ code: 1008, reason: 'no startRequest within the start timeout' });
      expect(s.workflow.calls).toEqual([]);

      const flood = await open(s);
      flood.send(start('5032', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
      await flood.next('newCheckpoint');
      for (let i = 0; i < 50; i++) flood.send({ heartbeat: { timestamp: String(i) } });
      expect(await flood.closed).toEqual({ code: 1008, reason: 'too many heartbeats' });
      const call = await callOf(s, '5032');
      await s.workflow.waitFor(() => call.ended !== undefined, 5_000, 'ended');
      expect(call).toMatchObject({ stopReasons: [], ended: { how: 'cancelled' } });
      expect(call.heartbeats).toBeLessThanOrEqual(20);
      await nothingLeft(s, '5032');
      await expect.poll(() => s.gateway.metrics.websocket.websocketSessionsOpen.get().then((m) => m.values[0]?.value), { timeout: 5_000 }).toBe(0);
    });

    it('a client that stops reading is bounded like a blocking caller: the service is paused, then the call cancelled after LONGRUN_WS_WRITE_TIMEOUT_MS', async () => {
      const s = await wsStack({ env: { LONGRUN_WS_WRITE_TIMEOUT_MS: '1500', LONGRUN_WS_PONG_TIMEOUT_MS: '60000' } });
      const session = await open(s);
      session.send(start('5033', [{ op: 'repeat', times: 400, steps: [{ op: 'checkpoint', bytes: 64 * 1024 }] }, { op: 'end' }]));
      await session.next('newCheckpoint');
      // The client stops reading its socket: TCP fills, then ws's queue, then the gateway pauses the service.
      (session.ws as unknown as { _socket: { pause(): void } })._socket.pause();
      const call = await callOf(s, '5033');
      await s.workflow.waitFor(() => call.ended !== undefined, 10_000, 'ended');
      expect(call).toMatchObject({ stopReasons: [], ended: { how: 'cancelled' } });
      // Flow control held the service back: it could not send its 400 checkpoints (25 MiB) into the gateway.
      expect(call.actionsSent).toBeLessThan(400);
      expect(s.logs()).toContain('websocket client took nothing: ending the run');
      await nothingLeft(s, '5033');
    });
  });

  describe('self-hosted billing (CloudServiceForSelfHosted)', () => {
    it('each trackLlmCallForSelfHosted goes to TrackSelfHostedExecuteWorkflow with the cloud headers, then the service gets an empty answer; on both transports; the billing stream ends with the run', async () => {
      const s = await wsStack();
      s.owner.configure(WEBSOCKET_PREAUTH, {
        lockConcurrentFlow: true,
        cloudServiceForSelfHosted: { URI: s.workflow.address, Headers: { 'x-gitlab-instance-id': 'self-hosted-1' } },
      });
      s.owner.configure('5020', { detached: true, cloudServiceForSelfHosted: { URI: s.workflow.address, Headers: { 'x-gitlab-instance-id': 'self-hosted-1' } } });
      const steps: Step[] = [{ op: 'checkpoint', text: 'a' }, { op: 'track_llm_call', featureQualifiedName: 'duo_chat', expect: { plainTextResponse: {} } }, { op: 'end' }];
      const session = await open(s);
      session.send(start('5021', steps));
      expect(await session.closed).toEqual({ code: 1000, reason: '' });
      const detached = await s.executeText('5020', { steps });
      expect(detached.status, detached.text).toBe(202);
      for (const id of ['5021', '5020']) {
        const call = await callOf(s, id);
        await s.workflow.waitFor(() => call.ended !== undefined, 5_000, `${id} ended`);
        expect(call, id).toMatchObject({ ended: { how: 'ok' }, protocolErrors: [], llmCalls: [{ workflowID: id, billed: true }] });
      }
      expect(s.workflow.billingCalls).toHaveLength(2);
      for (const billing of s.workflow.billingCalls) {
        expect(billing.metadata['x-gitlab-instance-id']).toBe('self-hosted-1');
        expect(billing.events).toEqual([expect.objectContaining({ featureQualifiedName: 'duo_chat', featureAiCatalogItem: false })]);
        expect(billing.answered).toBe(1);
      }
      await s.workflow.waitFor(() => s.workflow.billingCalls.every((c) => c.ended !== undefined), 5_000, 'billing streams ended');
    });

    it('without a cloud service the action is refused as before; a billing stream that fails answers the error and the run goes on', async () => {
      const s = await wsStack();
      const session = await open(s);
      session.send(start('5022', [{ op: 'track_llm_call', featureQualifiedName: 'duo_chat' }, { op: 'end' }]));
      expect((await session.closed).code).toBe(1000);
      const refusedCall = await callOf(s, '5022');
      expect(refusedCall.actionResponses[0]?.response.plainTextResponse?.error).toBe('action cannot be executed by this client: trackLlmCallForSelfHosted');
      expect(s.workflow.billingCalls).toEqual([]);

      s.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, cloudServiceForSelfHosted: { URI: s.workflow.address } });
      s.workflow.billing = { mode: 'fail', code: 'UNAVAILABLE', message: 'billing down' };
      const failing = await open(s);
      failing.send(start('5023', [{ op: 'track_llm_call', featureQualifiedName: 'duo_chat' }, { op: 'checkpoint', text: 'after' }, { op: 'end' }]));
      expect((await failing.closed).code).toBe(1000);
      // The run went on past the failed call: the checkpoint after it reached the client before the close.
      expect(failing.frames.map((f) => f.json['newCheckpoint'])).toEqual([expect.objectContaining({ checkpoint: 'after' })]);
      const call = await callOf(s, '5023');
      expect(call.actionResponses[0]?.response.plainTextResponse?.error).toMatch(/^failed to track the LLM call with the cloud service/);
      await nothingLeft(s, '5023');
    });
  });
});
