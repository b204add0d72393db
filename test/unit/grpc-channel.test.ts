/**
 * The gRPC channel to the workflow service, Workhorse parity (docs/spec.md §4): keepalive pings
 * that end a call on a dead connection, at an interval the real service's ping policy
 * accepts; the caller's User-Agent and GitLab client headers as the service receives them.
 * The service is the simulator behind its TCP front (h2-front.ts), which black-holes
 * connections and enforces the ping policy as gRPC core does.
 */
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import type { MemoryBackend } from '../../src/coordination/memory-backend';
import { scenarioMetadata } from '../../sandbox/scenario';
import { WorkflowServiceSimulator } from '../../sandbox/workflow-sim';
import { version } from '../../src/core/version';
import { ChannelPool, type WorkflowCall } from '../../src/workflow/channel-pool';
import { metricValue, startStack, type Stack } from '../../stack';

let stack: Stack | undefined;
const cleanups: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  await stack?.close();
  stack = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

const held = [{ op: 'checkpoint' as const, text: 'first' }, { op: 'hang' as const }];
/** Short keepalive for the tests: a ping every 200 ms, dropped after 500 ms without an answer. */
const fastKeepalive = { LONGRUN_GRPC_KEEPALIVE_TIME_MS: '200', LONGRUN_GRPC_KEEPALIVE_TIMEOUT_MS: '500' };

describe('keepalive ends a call on a dead connection', () => {
  it('detached: the run ends as workflow_unavailable, with its callback, the lock released, within a bound', async () => {
    stack = await startStack({ preauth: { detached: true }, workflow: { front: {} }, env: fastKeepalive });
    expect((await stack.executeText('400', { steps: held })).status).toBe(202);
    const blackHoledAt = Date.now();
    stack.workflow.blackHole();
    await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 1, 10_000, 'the segment end');
    // 200 ms until the next ping at most, 500 ms for its answer; generous for a loaded machine.
    expect(Date.now() - blackHoledAt).toBeLessThan(5_000);
    expect(stack.owner.segmentEnds[0]).toMatchObject({ workflow_id: '400', reason: 'workflow_unavailable' });
    expect((stack.gateway.backend as MemoryBackend).holder('400')).toBeUndefined();
    // The service never heard of it: only keepalive could tell.
    expect(stack.workflow.callsFor('400')[0]?.ended).toBeUndefined();
  });

  it('blocking: the ndjson stream ends instead of hanging', async () => {
    stack = await startStack({ preauth: { detached: false }, workflow: { front: {} }, env: fastKeepalive });
    const res = await stack.execute('401', { steps: held });
    expect(res.statusCode).toBe(200);
    const text = res.body.text();
    await stack.workflow.waitFor(() => stack!.workflow.callsFor('401')[0]?.actionsSent === 1, 5_000, 'the first checkpoint');
    const blackHoledAt = Date.now();
    stack.workflow.blackHole();
    expect(await text).toContain('"checkpoint":"first"');
    expect(Date.now() - blackHoledAt).toBeLessThan(5_000);
    expect(metricValue(await stack.metrics(), 'longrun_teardowns_total', { transport: 'http', reason: 'workflow_unavailable' })).toBe(1);
  });
});

describe("the keepalive interval against the service's ping policy", () => {
  // The real service: pings at least 10 s apart when it sends nothing, 2 strikes, then
  // GOAWAY. Scaled down by 100, with longrun's default ratio (20 s pings: twice the minimum).
  const policy = { minPingIntervalWithoutDataMs: 150, maxPingStrikes: 2 };

  it('pings twice the minimum apart: a quiet turn goes on and finishes', async () => {
    stack = await startStack({
      preauth: { detached: false },
      workflow: { front: { pingPolicy: policy } },
      env: { LONGRUN_GRPC_KEEPALIVE_TIME_MS: '300', LONGRUN_GRPC_KEEPALIVE_TIMEOUT_MS: '1000' },
    });
    const res = await stack.executeText('410', { steps: [{ op: 'checkpoint', text: 'a' }, { op: 'wait', ms: 1_800 }, { op: 'checkpoint', text: 'b' }, { op: 'end' }] });
    expect(res.status).toBe(200);
    expect(res.text).toContain('"checkpoint":"b"');
    expect(stack.workflow.front?.pingsReceived).toBeGreaterThanOrEqual(4);
    expect(stack.workflow.front?.goaways).toBe(0);
    expect(stack.workflow.callsFor('410')[0]?.ended?.how).toBe('ok');
  });

  it('pings closer than the minimum: the service sends GOAWAY and the turn is lost', async () => {
    stack = await startStack({
      preauth: { detached: false },
      workflow: { front: { pingPolicy: policy } },
      env: { LONGRUN_GRPC_KEEPALIVE_TIME_MS: '20', LONGRUN_GRPC_KEEPALIVE_TIMEOUT_MS: '500' },
    });
    const res = await stack.executeText('411', { steps: [{ op: 'checkpoint', text: 'a' }, { op: 'wait', ms: 1_500 }, { op: 'checkpoint', text: 'b' }, { op: 'end' }] });
    expect(res.text).not.toContain('"checkpoint":"b"');
    expect(stack.workflow.front?.goaways).toBe(1);
  });
});

describe('caller headers the service receives', () => {
  it("user-agent: the caller's, then longrun's; x-gitlab-client-name and -version as metadata", async () => {
    stack = await startStack({ preauth: { detached: false } });
    const res = await stack.executeText('420', {
      headers: { 'user-agent': 'gitlab-dispatcher/3.1 (ci-job 77)', 'x-gitlab-client-name': 'duo-cli', 'x-gitlab-client-version': '8.104.0' },
    });
    expect(res.status).toBe(200);
    const metadata = stack.workflow.callsFor('420')[0]?.metadata ?? {};
    expect(metadata['user-agent']).toMatch(new RegExp(`^gitlab-dispatcher/3\\.1 \\(ci-job 77\\) longrun/${version.replace(/\./g, '\\.')} grpc-node-js/`));
    expect(metadata['x-gitlab-client-name']).toBe('duo-cli');
    expect(metadata['x-gitlab-client-version']).toBe('8.104.0');
  });

  it('without caller headers: longrun/<version> only; unprintable values dropped, long ones cut at 255', async () => {
    stack = await startStack({ preauth: { detached: false } });
    expect((await stack.executeText('421', { headers: { 'user-agent': '' } })).status).toBe(200);
    const plain = stack.workflow.callsFor('421')[0]?.metadata ?? {};
    expect(plain['user-agent']).toMatch(new RegExp(`^longrun/${version.replace(/\./g, '\\.')} grpc-node-js/`));
    expect(plain['x-gitlab-client-name']).toBeUndefined();

    const long = 'n'.repeat(300);
    expect((await stack.executeText('422', { headers: { 'x-gitlab-client-name': long, 'x-gitlab-client-version': 'v\u00e9rsion' } })).status).toBe(200);
    const odd = stack.workflow.callsFor('422')[0]?.metadata ?? {};
    expect(odd['x-gitlab-client-name']).toBe('n'.repeat(255));
    expect(odd['x-gitlab-client-version']).toBeUndefined();
  });

  it("the owner's Service.Headers win over the caller's", async () => {
    stack = await startStack({ preauth: { detached: false, serviceHeaders: { 'x-gitlab-client-name': 'owner-says' } } });
    expect((await stack.executeText('423', { headers: { 'x-gitlab-client-name': 'caller-says' } })).status).toBe(200);
    expect(stack.workflow.callsFor('423')[0]?.metadata['x-gitlab-client-name']).toBe('owner-says');
  });
});

describe('connections per caller User-Agent are bounded', () => {
  it('past the bound a new User-Agent takes an idle group, or the plain connections when none is idle', async () => {
    const workflow = await WorkflowServiceSimulator.start();
    const pool = new ChannelPool({ streamsPerConnection: 10, maxUserAgentsPerTarget: 2 });
    const calls: WorkflowCall[] = [];
    cleanups.push(async () => {
      for (const call of calls) call.cancel();
      pool.close();
      await workflow.close();
    });
    let next = 0;
    const open = async (userAgent: string): Promise<{ call: WorkflowCall; received: string }> => {
      const workflowId = `ua-${next++}`;
      const call = pool.open(workflow.address, false, new grpc.Metadata(), userAgent);
      call.on('error', () => undefined);
      call.on('data', () => undefined);
      call.write({ startRequest: { workflowID: workflowId, workflowMetadata: scenarioMetadata(held) } });
      calls.push(call);
      await workflow.waitFor(() => workflow.callsFor(workflowId).length === 1, 5_000, `call ${workflowId}`);
      return { call, received: workflow.callsFor(workflowId)[0]?.metadata['user-agent'] ?? '' };
    };
    const a = await open('agent-a');
    expect(a.received).toMatch(/^agent-a longrun\//);
    expect((await open('agent-b')).received).toMatch(/^agent-b longrun\//);
    // Both groups busy: the third User-Agent rides the plain connections.
    expect((await open('agent-c')).received).toMatch(/^longrun\//);
    // Once agent-a's only call has ended, its group is idle and makes room.
    const ended = new Promise((resolve) => a.call.once('status', resolve));
    a.call.cancel();
    await ended;
    expect((await open('agent-d')).received).toMatch(/^agent-d longrun\//);
  });
});
