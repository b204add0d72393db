/**
 * MCP tools (docs/spec.md §2, §4), against real MCP servers on loopback built on the SDK's server
 * side (sandbox/mcp-sim.ts): discovery at the run's start into the
 * StartWorkflowRequest, runMCPTool answered on the server that offered the tool, the
 * owner's own `gitlab`/`orbit` servers, refused private addresses, and sessions that end
 * with their run — finished, stopped or drained — while a hung server holds neither the
 * 202 nor the drain.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { createLogger } from '../../src/core/log';
import { GatewayMetrics } from '../../src/gateway-metrics';
import { WORKHORSE_ISSUER, signOwnerJwt, verifyJwt } from '../../src/core/jwt';
import { McpConnector } from '../../src/mcp/connector';
import { OWNER_OAUTH_TOKEN } from '../../sandbox/owner-sim';
import { McpServerSimulator, type McpSimulatorOptions } from '../../sandbox/mcp-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { version } from '../../src/core/version';
import { messageTypes } from '../../src/workflow/contract';
import { metricValue, ndjsonLines, startStack, type Stack, type StackOptions } from '../../stack';
import { freePort } from '../../stack/ports';
import { testSecret } from '../../stack/secret';

let stack: Stack | undefined;
const sims: McpServerSimulator[] = [];

afterEach(async () => {
  await stack?.close();
  stack = undefined;
  await Promise.allSettled(sims.splice(0).map((sim) => sim.close()));
});

async function sim(options: McpSimulatorOptions = {}): Promise<McpServerSimulator> {
  const started = await McpServerSimulator.start(options);
  sims.push(started);
  return started;
}

/** A stack whose external MCP servers may be on loopback (the simulators are). */
function mcpStack(options: StackOptions): Promise<Stack> {
  return startStack({ ...options, env: { LONGRUN_MCP_ALLOW_PRIVATE: 'true', ...options.env } });
}

function call(workflowId: string) {
  const record = stack?.workflow.callsFor(workflowId)[0];
  if (!record) throw new Error(`no call for workflow ${workflowId}`);
  return record;
}

function answers(workflowId: string) {
  return call(workflowId).actionResponses.map((a) => a.response.plainTextResponse);
}

describe('discovery at the run start', () => {
  it('lists every server (all pages), offers <server>_<tool> with description and schema, filtered by Tools, and calls a tool by its own name on its own server', async () => {
    const paged = await sim({ pageSize: 3, extraTools: 4 });
    const other = await sim();
    stack = await mcpStack({
      preauth: {
        detached: false,
        mcpServers: {
          sim: { URL: paged.url, Headers: { 'x-mcp-auth': 'mcp-secret' }, Tools: null, PreApprovedTools: ['echo', 'not_listed'], Trusted: true },
          other: { URL: other.url, Tools: ['echo', 'not_listed'], PreApprovedTools: ['fail'] },
        },
      },
    });
    const res = await stack.executeText('800', {
      headers: { 'x-request-id': 'req-mcp-800' },
      body: {
        goal: 'g',
        mcpTools: [{ name: 'caller_tool' }],
        preapproved_tools: ['caller_tool'],
        workflowMetadata: scenarioMetadata([
          { op: 'mcp', name: 'sim_echo', args: '{"q":"hello"}' },
          { op: 'mcp', name: 'other_echo', args: '{"q":"there"}' },
          { op: 'checkpoint', text: 'done' },
          { op: 'end' },
        ]),
      },
    });
    expect(res.status).toBe(200);
    expect(ndjsonLines(res.text).filter((l) => l !== '')).toHaveLength(1);

    const start = call('800').startRequest;
    const named = ['echo', 'fail', 'slow', 'empty', 'image', 'large', 'broken', 'tool_001', 'tool_002', 'tool_003', 'tool_004'];
    expect(start.mcpTools?.map((t) => t.name)).toEqual([...named.map((n) => `sim_${n}`), 'other_echo']);
    const echo = start.mcpTools?.[0];
    expect(echo?.description).toBe('Answers with its arguments as JSON text.');
    expect(JSON.parse(echo?.inputSchema ?? '')).toEqual({ type: 'object', properties: { q: { type: 'string', description: 'What to echo' } } });
    expect(start.mcpTools?.filter((t) => t.name?.startsWith('sim_')).every((t) => t.trusted === true)).toBe(true);
    // Workhorse sends Trusted as an explicit value: false is present, not absent.
    expect(start.mcpTools?.at(-1)?.trusted).toBe(false);
    // Only offered tools are pre-approved: not_listed is not a tool, other_fail is not offered.
    expect(start.preapproved_tools).toEqual(['sim_echo']);

    // Eleven tools in pages of three: four tools/list requests, each after the last cursor.
    const lists = paged.received.filter((r) => r.method === 'tools/list');
    expect(lists.map((r) => (r.params as { cursor?: string } | undefined)?.cursor)).toEqual([undefined, '3', '6', '9']);

    expect(answers('800')).toEqual([{ response: '{"q":"hello"}' }, { response: '{"q":"there"}' }]);
    expect(paged.endpoint.calls).toEqual([{ name: 'echo', arguments: { q: 'hello' } }]);
    expect(other.endpoint.calls).toEqual([{ name: 'echo', arguments: { q: 'there' } }]);

    for (const r of paged.received) {
      expect(r.headers['x-mcp-auth']).toBe('mcp-secret');
      expect(r.headers['user-agent']).toBe(`longrun/${version}`);
      expect(r.headers['x-request-id']).toBe('req-mcp-800');
      // An external server is never sent the user's token.
      expect(r.headers['authorization']).toBeUndefined();
    }
    // No standalone SSE stream is opened.
    expect(paged.endpoint.gets).toHaveLength(0);

    // The finished run ended both sessions.
    await paged.endpoint.waitFor(() => paged.deletes.length === 1, 5_000, 'DELETE');
    await other.endpoint.waitFor(() => other.deletes.length === 1, 5_000, 'DELETE');
    expect(paged.deletes[0]?.sessionId).toBe(paged.received.find((r) => r.method === 'tools/call')?.sessionId);
    expect(paged.endpoint.openSessions).toBe(0);
    expect(other.endpoint.openSessions).toBe(0);
  });

  it('a server that is unreachable, refuses or is too slow is left out and counted; the turn starts with the others', async () => {
    const good = await sim();
    const hung = await sim({ hang: 'all' });
    const closedPort = await freePort();
    stack = await mcpStack({
      env: { LONGRUN_MCP_DISCOVERY_TIMEOUT_MS: '400' },
      preauth: {
        detached: false,
        mcpServers: {
          good: { URL: good.url, Tools: ['echo'] },
          gone: { URL: `http://127.0.0.1:${closedPort}/mcp` },
          hung: { URL: hung.url },
          nourl: {},
        },
      },
    });
    const started = performance.now();
    const res = await stack.executeText('801', { steps: [{ op: 'mcp', name: 'good_echo', args: '{}' }, { op: 'end' }] });
    expect(res.status).toBe(200);
    // The hung server held the start no longer than the discovery deadline.
    expect(performance.now() - started).toBeLessThan(4_000);
    expect(call('801').startRequest.mcpTools?.map((t) => t.name)).toEqual(['good_echo']);
    expect(answers('801')).toEqual([{ response: '{}' }]);
    expect(hung.received.map((r) => r.method)).toContain('initialize');
    expect(hung.received.map((r) => r.method)).not.toContain('tools/list');
    const metrics = await stack.metrics();
    expect(metricValue(metrics, 'longrun_mcp_discovery_failures_total', { server_kind: 'external', reason: 'failed' })).toBe(1);
    expect(metricValue(metrics, 'longrun_mcp_discovery_failures_total', { server_kind: 'external', reason: 'timeout' })).toBe(1);
    expect(metricValue(metrics, 'longrun_mcp_discovery_failures_total', { server_kind: 'external', reason: 'refused' })).toBe(1);
    expect(metricValue(metrics, 'longrun_mcp_discovery_duration_seconds_count')).toBe(1);
    const logs = stack.logs();
    expect(logs).toMatch(/"mcp_server":"gone".*"reason":"failed".*ECONNREFUSED/);
    expect(logs).toMatch(/"mcp_server":"nourl".*"reason":"refused".*no URL configured/);
  });
});

describe('icons and annotations (proto/contract.proto McpTool.icons = 4, annotations = 5)', () => {
  const protoCarries = (field: string): boolean => messageTypes.StartWorkflowRequest.lookupType('McpTool').fields[field] !== undefined;

  it('are mapped from the listing to the contract names', async () => {
    const mcp = await sim();
    const connector = new McpConnector({
      ownerUrl: new URL('http://127.0.0.1:9/'),
      secret: testSecret,
      jwtRefreshMs: 30_000,
      callTimeoutMs: 5_000,
      allowPrivate: true,
      metrics: new GatewayMetrics({ defaultMetrics: false }).mcp,
      logger: createLogger('silent'),
    });
    const toolbox = await connector.open({ servers: { sim: { URL: mcp.url } }, token: '', workflowId: '1', requestId: 'r' }, 5_000);
    try {
      const echo = toolbox.tools.find((t) => t.name === 'sim_echo');
      expect(echo?.icons).toEqual({ items: [{ url: 'https://icons.example.invalid/echo.png', mime_type: 'image/png', sizes: ['48x48'] }] });
      expect(echo?.annotations).toEqual({ title: 'Echo', read_only_hint: true, open_world_hint: false });
      // A tool with neither gets neither field.
      const fail = toolbox.tools.find((t) => t.name === 'sim_fail');
      expect(fail && 'icons' in fail).toBe(false);
      expect(fail && 'annotations' in fail).toBe(false);
    } finally {
      await toolbox.close();
      await connector.close();
    }
    expect(mcp.deletes).toHaveLength(1);
  });

  // proto/contract.proto declares McpTool.icons (the real contract has it): without it the encoder would
  // drop the field and the service could not receive it, so dropping it fails here.
  it('reach the workflow service', async () => {
    expect(protoCarries('icons'), 'proto/contract.proto declares McpTool.icons').toBe(true);
    const mcp = await sim();
    stack = await mcpStack({ preauth: { detached: false, mcpServers: { sim: { URL: mcp.url, Tools: ['echo'] } } } });
    expect((await stack.executeText('807', { steps: [{ op: 'end' }] })).status).toBe(200);
    const echo = (call('807').startRequest.mcpTools?.[0] ?? {}) as Record<string, unknown>;
    expect(echo['icons']).toMatchObject({ items: [{ url: 'https://icons.example.invalid/echo.png', mime_type: 'image/png', sizes: ['48x48'] }] });
    expect(echo['annotations']).toMatchObject({ title: 'Echo', read_only_hint: true, open_world_hint: false });
  });
});

describe('runMCPTool', () => {
  it('answers every call, whatever the tool or the server does, and the run goes on', async () => {
    const mcp = await sim();
    stack = await mcpStack({
      // Long enough for a 4 MiB answer on a loaded machine; sim_slow's 5 s stays well past it.
      env: { LONGRUN_MCP_TIMEOUT_MS: '2000' },
      preauth: { detached: false, mcpServers: { sim: { URL: mcp.url } } },
    });
    const res = await stack.executeText('802', {
      steps: [
        { op: 'mcp', name: 'sim_fail', args: '{}' },
        { op: 'mcp', name: 'sim_empty' },
        { op: 'mcp', name: 'sim_image', args: '{}' },
        { op: 'mcp', name: 'sim_large', args: JSON.stringify({ bytes: 4 * 1024 * 1024 }) },
        { op: 'mcp', name: 'sim_broken', args: '{}' },
        { op: 'mcp', name: 'sim_slow', args: '{"ms":5000}' },
        { op: 'mcp', name: 'sim_echo', args: 'not json' },
        { op: 'mcp', name: 'sim_echo', args: '[1,2]' },
        { op: 'mcp', name: 'echo', args: '{}' },
        { op: 'mcp', name: 'sim_echo', args: '{"q":"still here"}' },
        { op: 'checkpoint', text: 'after the tools' },
        { op: 'end' },
      ],
    });
    expect(res.status).toBe(200);
    expect(answers('802')).toEqual([
      { error: 'tool failed on purpose' },
      // Workhorse's words, in `response` unless the tool reported an error.
      { response: 'MCP tool response is empty' },
      { response: 'MCP tool response content type not supported' },
      { error: `MCP tool response exceeded size limit (${4 * 1024 * 1024 - 4 * 1024} bytes)` },
      { error: expect.stringMatching(/^MCP tool call failed: .*the tool broke on purpose/) as string },
      { error: 'MCP tool call timed out after 2000 ms' },
      { error: 'tool arguments are not valid JSON' },
      { error: 'tool arguments are not a JSON object' },
      // The server's own name is not the offered one.
      { error: 'mcp tool not available: echo' },
      { response: '{"q":"still here"}' },
    ]);
    expect(ndjsonLines(res.text).filter((l) => l !== '')).toHaveLength(1);
    // The arguments that were not a JSON object never reached the server.
    expect(mcp.endpoint.calls.map((c) => c.name)).toEqual(['fail', 'empty', 'image', 'large', 'broken', 'slow', 'echo']);
    const metrics = await stack.metrics();
    const calls = (result: string): number | undefined => metricValue(metrics, 'longrun_mcp_calls_total', { server_kind: 'external', result });
    expect([calls('ok'), calls('tool_error'), calls('too_large'), calls('error'), calls('timeout'), calls('invalid_args')]).toEqual([3, 1, 1, 1, 1, 2]);
    // Every call that reached the server: all but the two refused arguments.
    expect(metricValue(metrics, 'longrun_mcp_call_duration_seconds_count', { server_kind: 'external' })).toBe(7);
    // Tool and server names never become label values.
    expect(metrics).not.toMatch(/longrun_mcp_[a-z_]+\{[^}]*(sim|echo)/);
  });

  it("reaches the owner's own gitlab and orbit servers like the API relay: the user's token, the Workhorse headers, the caller's address", async () => {
    stack = await startStack({
      preauth: {
        detached: false,
        mcpServers: {
          gitlab: { Tools: ['echo'], PreApprovedTools: ['echo'], Headers: { 'x-gitlab-extra': 'configured' } },
          orbit: { Tools: null },
        },
      },
    });
    const res = await stack.executeText('803', {
      headers: { 'x-request-id': 'req-mcp-803', 'x-forwarded-for': '203.0.113.9' },
      steps: [{ op: 'mcp', name: 'gitlab_echo', args: '{"q":"owner"}' }, { op: 'mcp', name: 'orbit_fail', args: '{}' }, { op: 'end' }],
    });
    expect(res.status).toBe(200);
    const start = call('803').startRequest;
    expect(start.mcpTools?.filter((t) => t.name?.startsWith('gitlab_')).map((t) => t.name)).toEqual(['gitlab_echo']);
    expect(start.mcpTools?.filter((t) => t.name?.startsWith('orbit_'))).toHaveLength(7);
    expect(start.preapproved_tools).toEqual(['gitlab_echo']);
    expect(answers('803')).toEqual([{ response: '{"q":"owner"}' }, { error: 'tool failed on purpose' }]);

    const gitlab = stack.owner.mcp;
    expect(gitlab.calls).toEqual([{ name: 'echo', arguments: { q: 'owner' } }]);
    expect(stack.owner.orbitMcp.calls).toEqual([{ name: 'fail', arguments: {} }]);
    for (const r of gitlab.received) {
      expect(r.headers['authorization']).toBe(`Bearer ${OWNER_OAUTH_TOKEN}`);
      expect(await verifyJwt(testSecret, String(r.headers['gitlab-workhorse-api-request']), WORKHORSE_ISSUER)).toBe(true);
      expect(r.headers['gitlab-workhorse']).toBe(`longrun-${version}`);
      expect(r.headers['x-gitlab-duo-workflow-id']).toBe('803');
      expect(r.headers['x-gitlab-extra']).toBe('configured');
      expect(r.headers['x-request-id']).toBe('req-mcp-803');
      expect(r.headers['user-agent']).toBe(`longrun/${version}`);
      expect(r.headers['x-forwarded-for']).toMatch(/^203\.0\.113\.9, (::ffff:)?127\.0\.0\.1$/);
    }
    // The owner's sessions end with the run too; none was left on the API relay's record.
    await gitlab.waitFor(() => gitlab.deletes.length === 1, 5_000, 'gitlab DELETE');
    await stack.owner.orbitMcp.waitFor(() => stack!.owner.orbitMcp.deletes.length === 1, 5_000, 'orbit DELETE');
    expect(stack.owner.apiRequests).toHaveLength(0);
    expect(metricValue(await stack.metrics(), 'longrun_mcp_calls_total', { server_kind: 'owner', result: 'ok' })).toBe(1);
  });
});

describe('external servers on private addresses', () => {
  it('are refused without LONGRUN_MCP_ALLOW_PRIVATE, by address or by a name that resolves to one: never contacted, the turn starts', async () => {
    const mcp = await sim();
    const port = new URL(mcp.url).port;
    stack = await startStack({
      preauth: {
        detached: false,
        mcpServers: {
          literal: { URL: mcp.url },
          named: { URL: `http://localhost:${port}/mcp` },
          mapped: { URL: `http://[::ffff:127.0.0.1]:${port}/mcp` },
        },
      },
    });
    const res = await stack.executeText('804', { steps: [{ op: 'mcp', name: 'named_echo', args: '{}' }, { op: 'end' }] });
    expect(res.status).toBe(200);
    expect(call('804').startRequest.mcpTools ?? []).toEqual([]);
    expect(answers('804')).toEqual([{ error: 'mcp tool not available: named_echo' }]);
    expect(mcp.received).toHaveLength(0);
    expect(metricValue(await stack.metrics(), 'longrun_mcp_discovery_failures_total', { server_kind: 'external', reason: 'refused' })).toBe(3);
    expect(stack.logs()).toMatch(/"mcp_server":"named".*resolves to a non-public address/);
  });
});

describe('sessions end with their run', () => {
  const holdWithTool: Step[] = [{ op: 'mcp', name: 'sim_echo', args: '{}' }, { op: 'hang' }];

  it('a stopped run ends its sessions', async () => {
    const mcp = await sim();
    stack = await mcpStack({ preauth: { detached: true, mcpServers: { sim: { URL: mcp.url } } } });
    expect((await stack.executeText('805', { steps: holdWithTool })).status).toBe(202);
    await stack.workflow.waitFor(() => call('805').actionResponses.length === 1, 5_000, 'the tool answered');
    expect(mcp.deletes).toHaveLength(0);
    const stop = await request(`${stack.url}/internal/workflows/805/stop`, { method: 'POST', headers: { authorization: `Bearer ${await signOwnerJwt(testSecret, '805')}` } });
    expect(stop.statusCode).toBe(202);
    await stop.body.dump();
    await mcp.endpoint.waitFor(() => mcp.deletes.length === 1, 5_000, 'DELETE after the stop');
    expect(mcp.endpoint.openSessions).toBe(0);
  });

  it('a start refused after discovery (the process began draining meanwhile) ends the sessions it opened; no stream is opened', async () => {
    const fast = await sim();
    const hung = await sim({ hang: 'all' });
    stack = await mcpStack({
      env: { LONGRUN_MCP_DISCOVERY_TIMEOUT_MS: '1000' },
      preauth: { detached: false, mcpServers: { fast: { URL: fast.url }, hung: { URL: hung.url } } },
    });
    const pending = stack.executeText('808', { steps: [{ op: 'end' }] });
    await fast.endpoint.waitFor(() => fast.received.some((r) => r.method === 'tools/list'), 5_000, 'discovery under way');
    const drained = stack.gateway.drain();
    const res = await pending;
    expect(res.status).toBe(503);
    expect(JSON.parse(res.text).error.code).toBe('DRAINING');
    await fast.endpoint.waitFor(() => fast.deletes.length === 1, 5_000, 'DELETE after the refused start');
    expect(fast.endpoint.openSessions).toBe(0);
    expect(stack.workflow.callsFor('808')).toHaveLength(0);
    await drained;
  });

  it('a hung MCP server delays neither the 202 beyond the accept wait nor the drain; every session that was opened is ended', async () => {
    const busy = await sim();
    const slowBye = await sim({ hang: 'delete' });
    const hung = await sim({ hang: 'all' });
    stack = await mcpStack({
      env: { LONGRUN_ACCEPT_WAIT_MS: '800', LONGRUN_MCP_DISCOVERY_TIMEOUT_MS: '10000', LONGRUN_DRAIN_TIMEOUT_MS: '4000' },
      preauth: {
        detached: true,
        mcpServers: { busy: { URL: busy.url }, slowbye: { URL: slowBye.url, Tools: ['echo'] }, hung: { URL: hung.url } },
      },
    });
    const started = performance.now();
    const res = await stack.executeText('806', { steps: [{ op: 'mcp', name: 'busy_slow', args: '{"ms":60000}' }, { op: 'hang' }] });
    const toAccept = performance.now() - started;
    expect(res.status).toBe(202);
    // Discovery waited for the hung server only as long as the accept wait (800 ms), not
    // the 10 s discovery deadline, and the accept wait was not waited again after it.
    expect(toAccept).toBeGreaterThanOrEqual(700);
    expect(toAccept).toBeLessThan(4_000);
    expect(JSON.parse(res.text)).toMatchObject({ status: 'accepted', accepted_on: 'accept_wait_elapsed' });
    await stack.workflow.waitFor(() => stack!.workflow.callsFor('806').length === 1, 5_000, 'the start request');
    expect(call('806').startRequest.mcpTools?.map((t) => t.name)).toContain('slowbye_echo');
    expect(call('806').startRequest.mcpTools?.some((t) => t.name?.startsWith('hung_'))).toBe(false);
    await busy.endpoint.waitFor(() => busy.endpoint.calls.length === 1, 5_000, 'the slow call in flight');

    const drainStarted = performance.now();
    await stack.gateway.drain();
    // The stop is acknowledged at once; the hung DELETE is given up after 1 s.
    expect(performance.now() - drainStarted).toBeLessThan(3_500);
    expect(busy.deletes).toHaveLength(1);
    expect(slowBye.deletes).toHaveLength(1);
    // The hung server never gave a session: nothing to end there.
    expect(hung.deletes).toHaveLength(0);
    expect(stack.gateway.registry.size).toBe(0);
  });
});
