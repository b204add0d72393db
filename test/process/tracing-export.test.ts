/**
 * Spans on the wire (docs/spec.md §13), end to end through the built gateway as a child
 * process, configured by OTEL_* variables only, exporting to an OTLP/HTTP receiver on
 * loopback (sandbox/otlp-receiver.ts) in both encodings: the receiver, the owner
 * simulator (preauth, relays, the MCP tool call, the segment-end callback) and the workflow
 * simulator (the call's metadata) all saw the dispatcher's trace id; every log line of the
 * run carries its correlation id; no span carries a token, the goal or a payload; the drain
 * flushes its own span. A collector that is down or never answers costs the failure counter
 * and nothing else: the run completes, the drain ends in time.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { OWNER_OAUTH_TOKEN, type OwnerServiceSimulator } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import type { WorkflowServiceSimulator } from '../../sandbox/workflow-sim';
import { OtlpReceiver } from '../../sandbox/otlp-receiver';
import { freePort } from '../../stack/ports';
import { detachedExecuteTree, leaks, spanNamed, tree, type SpanRecord } from '../helpers/spans';
import { metricValue, startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';

let stack: Stack<'process'> | undefined;
let owner: OwnerServiceSimulator;
let workflow: WorkflowServiceSimulator;
let receiver: OtlpReceiver | undefined;

/** trace-a: on this test's simulators. */
async function setup(env: Record<string, string>): Promise<Replica> {
  stack = await startStack({
    gateway: 'process',
    name: 'trace',
    preauth: { detached: true, lockConcurrentFlow: true, mcpServers: { gitlab: { Tools: ['echo'] } } },
    env: {
      LONGRUN_LOG_LEVEL: 'info',
      LONGRUN_DRAIN_TIMEOUT_MS: '3000',
      // Batches every 100 ms rather than 5 s: the test waits less.
      OTEL_BSP_SCHEDULE_DELAY: '100',
      ...env,
    },
  });
  ({ owner, workflow } = stack);
  return stack.gateway;
}

afterEach(async () => {
  await stack?.close();
  stack = undefined;
  await receiver?.close();
  receiver = undefined;
});

const GOAL = 'goal-never-exported-0d1e';
const PAYLOADS = ['relay-body-never-exported-2f3a', 'query-never-exported-4b5c', 'tool-args-never-exported-6d7e', 'checkpoint-never-exported-8f90'];

const turn: Step[] = [
  { op: 'checkpoint', text: PAYLOADS[3] as string },
  { op: 'http', method: 'GET', path: `/api/v4/projects/7?search=${PAYLOADS[1]}` },
  { op: 'mcp', name: 'gitlab_echo', args: JSON.stringify({ q: PAYLOADS[2] }) },
  { op: 'http', method: 'POST', path: '/api/v4/echo', body: JSON.stringify({ note: PAYLOADS[0] }) },
  { op: 'end' },
];

/** A dispatcher with a trace of its own: its ids, and its execute. */
function dispatcher(): {
  traceId: string;
  spanId: string;
  execute(gateway: Replica, workflowId: string, requestId: string, steps: Step[]): Promise<{ status: number; body: Record<string, unknown>; ms: number }>;
} {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return {
    traceId,
    spanId,
    async execute(gateway, workflowId, requestId, steps) {
      const started = performance.now();
      const res = await request(`${gateway.url}/api/v4/ai/duo_workflows/workflows/${workflowId}/execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${spanId}-01`, 'x-request-id': requestId, authorization: 'Bearer caller-pat-never-exported' },
        body: JSON.stringify({ goal: GOAL, workflowMetadata: scenarioMetadata(steps) }),
      });
      return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown>, ms: performance.now() - started };
    },
  };
}

const traceOf = (traceparent: unknown): string | undefined => (typeof traceparent === 'string' ? traceparent.split('-')[1] : undefined);

async function metrics(gateway: Replica): Promise<string> {
  return (await request(`${gateway.opsUrl}/metrics`)).body.text();
}

/** SIGTERM: resolves with the exit code and how long the drain took, SIGTERM to exit. */
async function drain(gateway: Replica): Promise<{ code: number | string; ms: number }> {
  const started = performance.now();
  gateway.child.process.kill('SIGTERM');
  const code = await gateway.child.exited(15_000);
  return { code, ms: performance.now() - started };
}

function logLines(gateway: Replica): Array<Record<string, unknown>> {
  return gateway.child
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe.each(['http/protobuf', 'http/json'])('exported over OTLP %s', (protocol) => {
  it('the receiver, the owner and the workflow service saw one trace id, the dispatcher’s; the run’s log lines carry its correlation id; nothing secret was exported', async () => {
    receiver = await OtlpReceiver.start();
    const gateway = await setup({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: protocol, OTEL_SERVICE_NAME: 'longrun-under-test' });
    const caller = dispatcher();
    const res = await caller.execute(gateway, 'otlp-1', 'corr-otlp-1', turn);
    expect(res.status).toBe(202);
    const runId = res.body['run_id'] as string;
    await owner.waitFor(() => owner.segmentEnds.length === 1, 10_000, 'the segment end');
    const spans = (): SpanRecord[] => receiver?.spans ?? [];
    await expect.poll(() => spans().some((s) => s.name === 'workflow run'), { timeout: 10_000 }).toBe(true);
    expect(metricValue(await metrics(gateway), 'longrun_trace_export_failures_total')).toBe(0);
    expect(await drain(gateway)).toMatchObject({ code: 0 });

    // Every export in the encoding asked for.
    expect(new Set(receiver.exports.map((e) => e.contentType))).toEqual(new Set([protocol === 'http/json' ? 'application/json' : 'application/x-protobuf']));
    const received = spans();
    expect(new Set(received.map((s) => s.resource['service.name']))).toEqual(new Set(['longrun-under-test']));
    // The trace under the dispatcher's span (not exported: it is the dispatcher's own), whole.
    const root: SpanRecord = { ...(received[0] as SpanRecord), traceId: caller.traceId, spanId: caller.spanId, parentSpanId: undefined, name: 'dispatcher', kind: 'CLIENT' };
    expect(tree(received, root)).toBe(detachedExecuteTree('dispatcher'));
    expect(spanNamed(received, 'workflow run').attributes).toMatchObject({ 'longrun.run_id': runId, 'longrun.end_reason': 'finished', 'rpc.grpc.status_code': 0 });
    // The drain flushed its own span (a trace of its own) before the process left.
    expect(spanNamed(received, 'drain').attributes).toMatchObject({ 'longrun.drain.runs': 0, 'longrun.drain.outcome': 'done' });

    // What the peers received: the same trace, the correlation id.
    const sawTraces = [
      ...owner.preauths.map((r) => traceOf(r.headers['traceparent'])),
      ...owner.apiRequests.map((r) => traceOf(r.headers['traceparent'])),
      ...owner.segmentEndRequests.map((r) => traceOf(r.headers['traceparent'])),
      ...owner.mcp.received.filter((r) => r.method === 'tools/call').map((r) => traceOf(r.headers['traceparent'])),
      ...workflow.calls.map((c) => traceOf(c.metadata['traceparent'])),
    ];
    // One preauth, two relays, the callback, the tool call, the call.
    expect(sawTraces).toEqual(Array(6).fill(caller.traceId));
    expect(workflow.calls[0]?.metadata).toMatchObject({ 'x-request-id': 'corr-otlp-1', 'x-gitlab-correlation-id': 'corr-otlp-1' });
    expect([...owner.preauths, ...owner.apiRequests, ...owner.segmentEndRequests].map((r) => r.headers['x-request-id'])).toEqual(Array(4).fill('corr-otlp-1'));

    const lines = logLines(gateway).filter((l) => l['run_id'] === runId || l['request_id'] === 'corr-otlp-1');
    expect(lines.map((l) => l['msg'])).toEqual(expect.arrayContaining(['mcp tools discovered', 'mcp tool called', 'execute request', 'run ended']));
    for (const line of lines) expect(line).toMatchObject({ correlation_id: 'corr-otlp-1', request_id: 'corr-otlp-1', trace_id: caller.traceId });

    expect(leaks(received, [OWNER_OAUTH_TOKEN, GOAL, ...PAYLOADS, 'caller-pat-never-exported'])).toEqual([]);
  }, 60_000);
});

describe('a collector that does not take the spans', () => {
  it.each(['down', 'never answers'])(
    '(%s) costs the failure counter only: runs are accepted and complete as ever, the drain ends in time',
    async (how) => {
      receiver = how === 'never answers' ? await OtlpReceiver.start({ hang: true }) : undefined;
      const endpoint = receiver?.url ?? `http://127.0.0.1:${await freePort()}`;
      // A hung export holds for 5 s: a 202 that waited for one would take that long.
      const gateway = await setup({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_TIMEOUT: '5000' });
      const caller = dispatcher();
      for (const n of [1, 2, 3]) {
        const res = await caller.execute(gateway, `otlp-down-${n}`, `corr-down-${n}`, turn);
        expect(res.status).toBe(202);
        // No export is on the way (the first action is immediate here).
        expect(res.ms).toBeLessThan(5_000);
      }
      await owner.waitFor(() => owner.segmentEnds.length === 3, 10_000, 'the three segment ends');
      expect(owner.segmentEnds.map((e) => e.reason)).toEqual(['finished', 'finished', 'finished']);
      await expect.poll(async () => metricValue(await metrics(gateway), 'longrun_trace_export_failures_total') ?? 0, { timeout: 15_000 }).toBeGreaterThanOrEqual(1);
      if (receiver) expect(receiver.held).toBeGreaterThanOrEqual(1);

      // A run in flight when SIGTERM comes: stopped, called back, and the process gone well within the 3 s budget.
      expect((await caller.execute(gateway, 'otlp-down-4', 'corr-down-4', [{ op: 'checkpoint', text: 'working' }, { op: 'hang' }])).status).toBe(202);
      const drained = await drain(gateway);
      expect(drained.code).toBe(0);
      expect(drained.ms).toBeLessThan(3_000);
      expect(owner.segmentEnds.map((e) => [e.workflow_id, e.reason])).toContainEqual(['otlp-down-4', 'drain']);
      const finished = logLines(gateway).find((l) => l['msg'] === 'drain finished');
      expect(finished).toMatchObject({ outcome: 'done', runs_left: 0 });
      // Said once per outage, not once per failed batch.
      expect(logLines(gateway).filter((l) => l['msg'] === 'trace export failed: spans are dropped until the collector answers')).toHaveLength(1);
    },
    60_000,
  );
});
