/**
 * Tracing and correlation (docs/spec.md §13) on a real gateway and the simulators, its
 * spans caught by the SDK's in-memory exporter: the span tree of a detached execute under
 * the dispatcher's span, the traceparent each call carried (what the owner and the
 * workflow service received), a blocking execute with an invalid traceparent, a WebSocket
 * run parked and re-attached on the same replica and on another one (linked both ways),
 * the owner's stop and a drain — and no attribute or event carrying a token, a goal or a
 * payload. With tracing off nothing is added but the correlation headers.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type WebSocket from 'ws';
import { OWNER_OAUTH_TOKEN, WEBSOCKET_PREAUTH } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import { ownerJwt } from '../../stack';
import { detachedExecuteTree, leaks, spanNamed, SpanCapture, tree, type SpanRecord } from '../helpers/spans';
import { startStack, type Stack } from '../../stack';
import { openSession, resume, runsState, start, type Client } from '../helpers/ws-session';

let stack: Stack | undefined;
const clients: WebSocket[] = [];

afterEach(async () => {
  for (const ws of clients.splice(0)) ws.terminate();
  await stack?.close();
  stack = undefined;
});

/** What no span may carry: the user's token, the goal, what was relayed and answered. */
const GOAL = 'goal-text-never-in-a-span-4c1d';
const PAYLOADS = ['relay-body-never-in-a-span-77e0', 'query-value-never-in-a-span-a1b2', 'mcp-args-never-in-a-span-09f3', 'checkpoint-never-in-a-span-5e6f'];
const SECRETS = [OWNER_OAUTH_TOKEN, GOAL, ...PAYLOADS, 'caller-pat-never-in-a-span'];

const EXECUTE = 'POST /api/v4/ai/duo_workflows/workflows/{workflow_id}/execute';

const turn: Step[] = [
  { op: 'checkpoint', text: PAYLOADS[3] as string },
  { op: 'http', method: 'GET', path: `/api/v4/projects/7?search=${PAYLOADS[1]}` },
  { op: 'mcp', name: 'gitlab_echo', args: JSON.stringify({ q: PAYLOADS[2] }) },
  { op: 'http', method: 'POST', path: '/api/v4/echo', body: JSON.stringify({ note: PAYLOADS[0] }) },
  { op: 'end' },
];

function body(steps: Step[]): unknown {
  return { goal: GOAL, workflowMetadata: JSON.stringify({ scenario: steps }) };
}

async function spansUntil(capture: SpanCapture, done: (spans: SpanRecord[]) => boolean): Promise<SpanRecord[]> {
  await expect.poll(() => done(capture.spans()), { timeout: 10_000 }).toBe(true);
  return capture.spans();
}

const traceparentOf = (span: SpanRecord): string => `00-${span.traceId}-${span.spanId}-01`;

function logLines(s: Stack): Array<Record<string, unknown>> {
  return s
    .logs()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('a detached execute', () => {
  it('is one tree under the dispatcher’s span: preauth, lock, stream open under the execute; each relay, the tool call and the callback under the run linked to it', async () => {
    const capture = new SpanCapture();
    stack = await startStack({ tracing: capture.tracing, preauth: { detached: true, lockConcurrentFlow: true, mcpServers: { gitlab: { Tools: ['echo'] } } } });
    const dispatcher = capture.callerSpan('dispatcher job');
    const res = await stack.executeText('trace-1', {
      body: body(turn),
      headers: { traceparent: dispatcher.traceparent, tracestate: 'vendor=opaque', 'x-request-id': 'corr-trace-1', authorization: 'Bearer caller-pat-never-in-a-span' },
    });
    expect(res.status).toBe(202);
    const runId = (JSON.parse(res.text) as { run_id: string }).run_id;
    dispatcher.span.end();
    const spans = await spansUntil(capture, (all) => all.some((s) => s.name === 'workflow run') && all.some((s) => s.name === 'dispatcher job'));

    const root = spanNamed(spans, 'dispatcher job');
    expect(tree(spans, root)).toBe(detachedExecuteTree('dispatcher job'));
    const execute = spanNamed(spans, EXECUTE);
    const run = spanNamed(spans, 'workflow run');
    expect(execute.attributes).toMatchObject({
      'http.response.status_code': 202,
      'longrun.workflow_id': 'trace-1',
      'longrun.run_id': runId,
      'longrun.transport': 'detached',
      correlation_id: 'corr-trace-1',
    });
    expect(execute.events).toEqual([{ name: 'accepted', attributes: { 'longrun.accepted_on': 'first_action' } }]);
    expect(run.attributes).toMatchObject({
      'longrun.workflow_id': 'trace-1',
      'longrun.run_id': runId,
      'longrun.transport': 'detached',
      'longrun.end_reason': 'finished',
      'rpc.grpc.status_code': 0,
      'longrun.actions': 4,
    });
    // The run outlives its request: linked to it, not under it.
    expect(run.links).toEqual([{ traceId: execute.traceId, spanId: execute.spanId, attributes: { 'longrun.link': 'started_by' } }]);
    expect(run.end > execute.end).toBe(true);
    expect(spanNamed(spans, 'lock acquire').attributes).toMatchObject({ 'longrun.lock.result': 'ok' });
    expect(spanNamed(spans, 'workflow stream open').attributes).toMatchObject({ 'rpc.system': 'grpc', 'rpc.method': 'ExecuteWorkflow', 'longrun.stream.outcome': 'written' });
    expect([1, 2].map((n) => spanNamed(spans, 'owner relay', n).attributes)).toEqual([
      { 'http.request.method': 'GET', 'http.response.status_code': 200 },
      { 'http.request.method': 'POST', 'http.response.status_code': 200 },
    ]);
    expect(spanNamed(spans, 'mcp tool call').attributes).toEqual({ 'longrun.mcp.tool': 'gitlab_echo', 'longrun.mcp.server_kind': 'owner', 'longrun.mcp.result': 'ok' });
    expect(spanNamed(spans, 'owner segment_end').attributes).toMatchObject({
      'http.response.status_code': 204,
      'longrun.callback.result': 'ok',
      'longrun.callback.attempts': 1,
      'longrun.end_reason': 'finished',
    });

    // What each peer received: the traceparent of the span that made the call, the caller's tracestate, the correlation id.
    const { owner, workflow } = stack;
    expect(owner.preauths[0]?.headers).toMatchObject({
      traceparent: traceparentOf(spanNamed(spans, 'owner preauth')),
      tracestate: 'vendor=opaque',
      'x-request-id': 'corr-trace-1',
    });
    expect(owner.apiRequests.map((r) => [r.headers['traceparent'], r.headers['x-request-id']])).toEqual([
      [traceparentOf(spanNamed(spans, 'owner relay', 1)), 'corr-trace-1'],
      [traceparentOf(spanNamed(spans, 'owner relay', 2)), 'corr-trace-1'],
    ]);
    const toolCall = owner.mcp.received.find((r) => r.method === 'tools/call');
    expect(toolCall?.headers).toMatchObject({ traceparent: traceparentOf(spanNamed(spans, 'mcp tool call')), 'x-request-id': 'corr-trace-1' });
    // And in the message, where MCP servers look for it (params._meta).
    expect((toolCall?.params as { _meta?: unknown })._meta).toEqual({ traceparent: traceparentOf(spanNamed(spans, 'mcp tool call')), tracestate: 'vendor=opaque' });
    // The session's other requests (initialize, tools/list) carry the execute's.
    expect(owner.mcp.received.find((r) => r.method === 'tools/list')?.headers['traceparent']).toBe(traceparentOf(execute));
    expect(owner.segmentEndRequests[0]?.headers).toMatchObject({ traceparent: traceparentOf(spanNamed(spans, 'owner segment_end')), 'x-request-id': 'corr-trace-1' });
    expect(workflow.calls[0]?.metadata).toMatchObject({
      traceparent: traceparentOf(spanNamed(spans, 'workflow stream open')),
      tracestate: 'vendor=opaque',
      'x-request-id': 'corr-trace-1',
      'x-gitlab-correlation-id': 'corr-trace-1',
    });

    // Every line about the request and the run carries the correlation id; the run's its span's ids.
    const lines = logLines(stack).filter((l) => l['request_id'] === 'corr-trace-1' || l['run_id'] === runId);
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const line of lines) expect(line['correlation_id']).toBe('corr-trace-1');
    const ended = lines.find((l) => l['msg'] === 'run ended');
    expect(ended).toMatchObject({ trace_id: run.traceId, span_id: run.spanId });
    expect(lines.find((l) => l['msg'] === 'execute request')).toMatchObject({ trace_id: execute.traceId, span_id: execute.spanId });

    expect(leaks(spans, SECRETS)).toEqual([]);
    // The scan finds what it looks for, wherever it is.
    expect(leaks([{ ...run, events: [{ name: 'x', attributes: { note: `said ${GOAL}` } }] }], SECRETS)).toEqual([`workflow run: event x note holds ${JSON.stringify(GOAL)}`]);
  });
});

describe('a blocking execute', () => {
  it('with an invalid traceparent starts a new trace, and its run’s spans sit under the request (no lock asked: no lock span)', async () => {
    const capture = new SpanCapture();
    stack = await startStack({ tracing: capture.tracing, preauth: { detached: false, lockConcurrentFlow: false } });
    const res = await stack.executeText('trace-2', {
      body: body([{ op: 'checkpoint', text: 'one' }, { op: 'http', path: '/api/v4/projects/7' }, { op: 'end' }]),
      headers: { traceparent: '00-00000000000000000000000000000000-0000000000000000-01' },
    });
    expect(res.status).toBe(200);
    const spans = await spansUntil(capture, (all) => all.some((s) => s.name === EXECUTE));
    const execute = spanNamed(spans, EXECUTE);
    expect(execute.parentSpanId).toBeUndefined();
    expect(tree(spans, execute)).toBe([`${EXECUTE} [SERVER]`, '  owner preauth [CLIENT]', '  workflow stream open [CLIENT]', '  owner relay [CLIENT]'].join('\n'));
    expect(execute.attributes).toMatchObject({ 'http.response.status_code': 200, 'longrun.transport': 'http' });
    expect(spans.some((s) => s.name === 'workflow run')).toBe(false);
  });
});

describe('a WebSocket run', () => {
  const ENV = { LONGRUN_WS_PING_MS: '100', LONGRUN_WS_PONG_TIMEOUT_MS: '1000', LONGRUN_WS_RESUME_WINDOW_MS: '5000' };
  const reads: Step[] = [
    { op: 'client', action: { runReadFile: { filepath: 'a.txt' } }, expect: { plainTextResponse: { response: 'A' } } },
    { op: 'checkpoint', text: 'after' },
    { op: 'end' },
  ];

  async function parkAndResume(origin: Stack, first: { url: string }, second: { url: string }, id: string): Promise<void> {
    const a: Client = await openSession(first.url, clients);
    a.send(start(id, reads));
    await a.next('runReadFile');
    a.ws.terminate();
    await expect.poll(async () => (await runsState(origin))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
    const b = await openSession(second.url, clients);
    b.send(resume(id));
    const read = await b.next('runReadFile');
    b.send({ actionResponse: { requestID: read['requestID'], plainTextResponse: { response: 'A' } } });
    expect(await b.closed).toEqual({ code: 1000, reason: '' });
  }

  it('parked and re-attached on the same replica: the wait is a span under the run, and the run and the new session are linked both ways', async () => {
    const capture = new SpanCapture();
    stack = await startStack({ tracing: capture.tracing, env: ENV });
    stack.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-9' });
    await parkAndResume(stack, stack, stack, 'trace-ws-1');
    const spans = await spansUntil(capture, (all) => all.some((s) => s.name === 'workflow run') && all.filter((s) => s.name === 'GET /api/v4/ai/duo_workflows/ws').length === 2);
    const [first, second] = spans.filter((s) => s.name === 'GET /api/v4/ai/duo_workflows/ws').sort((x, y) => (x.start < y.start ? -1 : 1)) as [SpanRecord, SpanRecord];
    const run = spanNamed(spans, 'workflow run');
    const park = spanNamed(spans, 'websocket parked');
    expect(tree(spans, first)).toBe(
      ['GET /api/v4/ai/duo_workflows/ws [SERVER]', '  owner preauth [CLIENT]', '  lock acquire [INTERNAL]', '  workflow stream open [CLIENT]'].join('\n'),
    );
    expect(tree(spans, run)).toBe(['workflow run [INTERNAL]', '  websocket parked [INTERNAL]'].join('\n'));
    expect(first.attributes).toMatchObject({ 'http.response.status_code': 101, 'longrun.workflow_id': 'trace-ws-1', 'longrun.run_id': run.attributes['longrun.run_id'] });
    expect(second.attributes).toMatchObject({ 'longrun.run_id': run.attributes['longrun.run_id'], 'longrun.websocket.close_code': 1000 });
    expect(run.links.map((l) => [l.spanId, l.attributes['longrun.link']])).toEqual([
      [first.spanId, 'started_by'],
      [second.spanId, 'reattached_by'],
    ]);
    expect(second.links).toEqual([{ traceId: run.traceId, spanId: run.spanId, attributes: { 'longrun.link': 'reattached_to' } }]);
    expect(park.attributes).toEqual({ 'longrun.park.outcome': 'reattached', 'longrun.reattach.how': 'local' });
    expect(park.links.map((l) => l.spanId)).toEqual([second.spanId]);
    expect(run.events.map((e) => [e.name, e.attributes['longrun.reattach.how']])).toEqual([['reattached', 'local']]);
    expect(run.attributes).toMatchObject({ 'longrun.transport': 'websocket', 'longrun.end_reason': 'finished' });
  });

  it('re-attached through another replica: the claim carries the session’s span and the answer the run’s, so each replica’s span links to the other’s', async () => {
    const holder = new SpanCapture();
    const other = new SpanCapture();
    stack = await startStack({ redis: 'own', tracing: holder.tracing, env: { ...ENV, LONGRUN_REPLICA_ID: 'replica-a' } });
    stack.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-9' });
    const peer = await stack.startReplica({ env: { LONGRUN_REPLICA_ID: 'replica-b' }, tracing: other.tracing });
    await parkAndResume(stack, stack, peer, 'trace-ws-2');
    const onHolder = await spansUntil(holder, (all) => all.some((s) => s.name === 'workflow run'));
    const onOther = await spansUntil(other, (all) => all.some((s) => s.name === 'GET /api/v4/ai/duo_workflows/ws'));
    const run = spanNamed(onHolder, 'workflow run');
    const park = spanNamed(onHolder, 'websocket parked');
    const bridged = spanNamed(onOther, 'GET /api/v4/ai/duo_workflows/ws');
    expect(bridged.links).toEqual([{ traceId: run.traceId, spanId: run.spanId, attributes: { 'longrun.link': 'reattached_to' } }]);
    expect(bridged.attributes).toMatchObject({ 'longrun.run_id': run.attributes['longrun.run_id'], 'longrun.workflow_id': 'trace-ws-2' });
    expect(park.attributes).toEqual({ 'longrun.park.outcome': 'reattached', 'longrun.reattach.how': 'bridged', 'longrun.socket_replica': 'replica-b' });
    expect(park.links.map((l) => [l.traceId, l.spanId])).toEqual([[bridged.traceId, bridged.spanId]]);
    expect(run.links.map((l) => l.spanId)).toContain(bridged.spanId);
  });
});

describe('stops', () => {
  it('the owner’s stop is a SERVER span under its traceparent; the run’s stop handshake names the word it sent', async () => {
    const capture = new SpanCapture();
    stack = await startStack({ tracing: capture.tracing, preauth: { detached: true } });
    expect((await stack.executeText('trace-3', { body: body([{ op: 'checkpoint', text: 'working' }, { op: 'hang' }]) })).status).toBe(202);
    const owner = capture.callerSpan('owner stop');
    const res = await request(`${stack.url}/internal/workflows/trace-3/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await ownerJwt('trace-3')}`, traceparent: owner.traceparent },
    });
    expect(res.statusCode).toBe(202);
    await res.body.dump();
    owner.span.end();
    const spans = await spansUntil(capture, (all) => all.some((s) => s.name === 'workflow run'));
    expect(tree(spans, spanNamed(spans, 'owner stop'), ['http.response.status_code'])).toBe(
      ['owner stop [CLIENT]', '  POST /internal/workflows/{workflow_id}/stop [SERVER] http.response.status_code=202'].join('\n'),
    );
    expect(tree(spans, spanNamed(spans, 'workflow run'), ['longrun.stop.reason', 'longrun.stop.outcome'])).toBe(
      [
        'workflow run [INTERNAL] longrun.stop.outcome=ack',
        '  stop handshake [INTERNAL] longrun.stop.reason=USER_STOP longrun.stop.outcome=ack',
        '  owner segment_end [CLIENT]',
      ].join('\n'),
    );
    expect(spanNamed(spans, 'workflow run').attributes['longrun.end_reason']).toBe('stop_requested');
  });

  it('a drain is one span, each run it stopped an event; each run’s handshake sent WORKHORSE_SERVER_SHUTDOWN', async () => {
    const capture = new SpanCapture();
    stack = await startStack({ tracing: capture.tracing, preauth: { detached: true } });
    const runIds: string[] = [];
    for (const id of ['trace-4a', 'trace-4b']) {
      const res = await stack.executeText(id, { body: body([{ op: 'checkpoint', text: 'working' }, { op: 'hang' }]) });
      runIds.push((JSON.parse(res.text) as { run_id: string }).run_id);
    }
    await stack.gateway.drain();
    const spans = capture.spans();
    const drain = spanNamed(spans, 'drain');
    expect(drain.parentSpanId).toBeUndefined();
    expect(drain.attributes).toEqual({ 'longrun.drain.runs': 2, 'longrun.drain.outcome': 'done', 'longrun.drain.runs_left': 0 });
    expect(drain.events.map((e) => [e.name, e.attributes['longrun.run_id'], e.attributes['longrun.end_reason']]).sort()).toEqual(
      runIds.map((id) => ['run stopped', id, 'drain']).sort(),
    );
    for (const n of [1, 2]) {
      expect(spanNamed(spans, 'stop handshake', n).attributes).toMatchObject({
        'longrun.stop.reason': 'WORKHORSE_SERVER_SHUTDOWN',
        'longrun.stop.outcome': 'ack',
        'rpc.grpc.status_code': 14,
      });
    }
  });
});

describe('tracing off', () => {
  it('adds no trace header of its own: the caller’s traceparent reaches the preauth as any header, nothing else carries one; the correlation id goes everywhere', async () => {
    stack = await startStack({ preauth: { detached: true } });
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const res = await stack.executeText('trace-5', {
      body: body([{ op: 'http', path: '/api/v4/projects/7' }, { op: 'end' }]),
      headers: { traceparent, 'x-request-id': 'corr-trace-5' },
    });
    expect(res.status).toBe(202);
    await stack.owner.waitFor(() => stack?.owner.segmentEnds.length === 1, 10_000, 'the segment end');
    expect(stack.owner.preauths[0]?.headers['traceparent']).toBe(traceparent);
    expect(stack.owner.apiRequests[0]?.headers['traceparent']).toBeUndefined();
    expect(stack.owner.segmentEndRequests[0]?.headers).toMatchObject({ 'x-request-id': 'corr-trace-5' });
    expect(stack.owner.segmentEndRequests[0]?.headers['traceparent']).toBeUndefined();
    expect(stack.workflow.calls[0]?.metadata).toMatchObject({ 'x-request-id': 'corr-trace-5', 'x-gitlab-correlation-id': 'corr-trace-5' });
    expect(stack.workflow.calls[0]?.metadata['traceparent']).toBeUndefined();
    const runLines = logLines(stack).filter((l) => l['msg'] === 'run ended');
    expect(runLines).toHaveLength(1);
    expect(runLines[0]).toMatchObject({ request_id: 'corr-trace-5', correlation_id: 'corr-trace-5' });
    expect(runLines[0]?.['trace_id']).toBeUndefined();
  });
});
