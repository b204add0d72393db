/**
 * Drain on SIGTERM (docs/spec.md §7) and segment-end callbacks (§6), with the gateway as a child
 * process: every turn handed back in seconds, none lost or duplicated, the owner told at
 * once, and a resume on another replica.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { lockKey, workhorseKeys } from '../../src/redis/keys';
import type { OwnerServiceSimulator } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import type { WorkflowServiceSimulator } from '../../sandbox/workflow-sim';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';
import { startRedis, type RedisServer } from '../../stack/redis-server';

let redis: RedisServer;
let client: Redis;
let stack: Stack<'process'> | undefined;
let owner: OwnerServiceSimulator;
let workflow: WorkflowServiceSimulator;
let nextWorkflow = 5_000;

const hang: Step[] = [{ op: 'checkpoint', text: 'working' }, { op: 'hang' }];

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
  client.on('error', () => undefined);
});

afterAll(async () => {
  client.disconnect();
  await redis.stop();
});

afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** drain-a, drain-b, …: on this test's simulators and the file's Redis. */
async function setup(env: Record<string, string> = {}, count = 1): Promise<Replica[]> {
  stack = await startStack({
    gateway: 'process',
    replicas: count,
    name: 'drain',
    redis: { url: redis.url },
    preauth: { detached: true },
    env: { LONGRUN_LOG_LEVEL: 'info', ...env },
  });
  ({ owner, workflow } = stack);
  return [...stack.replicas];
}

async function startRuns(replica: Replica, n: number, steps: Step[] = hang): Promise<string[]> {
  const ids = Array.from({ length: n }, () => String(nextWorkflow++));
  for (let i = 0; i < ids.length; i += 25) {
    const batch = ids.slice(i, i + 25);
    const results = await Promise.all(batch.map((id) => replica.execute(id, steps)));
    expect(results.map((r) => r.status)).toEqual(batch.map(() => 202));
  }
  return ids;
}

async function lockKeys(): Promise<string[]> {
  return client.keys(lockKey('*'));
}

function drainMs(stdout: string): number | undefined {
  for (const line of stdout.split('\n')) {
    if (!line.includes('"drain finished"')) continue;
    return (JSON.parse(line) as { drain_ms: number }).drain_ms;
  }
  return undefined;
}

describe('SIGTERM drain', () => {
  it('200 detached runs: one WORKHORSE_SERVER_SHUTDOWN each, no lock left, 200 drain callbacks, exit 0 within the budget', async () => {
    const [a] = (await setup({ LONGRUN_DRAIN_TIMEOUT_MS: '8000' })) as [Replica];
    const ids = await startRuns(a, 200);
    expect(await lockKeys()).toHaveLength(200);
    const signalledAt = Date.now();
    a.child.process.kill('SIGTERM');
    expect(await a.child.exited(10_000)).toBe(0);
    const elapsed = Date.now() - signalledAt;
    expect(elapsed).toBeLessThan(8_000);
    for (const id of ids) {
      const calls = workflow.callsFor(id);
      expect(calls).toHaveLength(1);
      expect(calls[0]?.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
      expect(calls[0]?.ended).toMatchObject({ how: 'status', code: 'UNAVAILABLE' });
    }
    expect(await lockKeys()).toEqual([]);
    expect(await client.keys(workhorseKeys.run('*'))).toEqual([]);
    expect(owner.segmentEnds).toHaveLength(200);
    expect(new Set(owner.segmentEnds.map((e) => e.workflow_id))).toEqual(new Set(ids));
    expect(owner.segmentEnds.every((e) => e.reason === 'drain')).toBe(true);
    console.log(`drain of 200 runs: ${drainMs(a.child.stdout())} ms in the gateway, ${elapsed} ms from SIGTERM to exit`);
  });

  it('a workflow service that never acks: the drain still ends within its budget, locks released, callbacks sent', async () => {
    const [a] = (await setup({ LONGRUN_DRAIN_TIMEOUT_MS: '2000', LONGRUN_STOP_ACK_TIMEOUT_MS: '10000' })) as [Replica];
    workflow.ignoreStops = true;
    const ids = await startRuns(a, 20);
    const signalledAt = Date.now();
    a.child.process.kill('SIGTERM');
    expect(await a.child.exited(5_000)).toBe(0);
    expect(Date.now() - signalledAt).toBeLessThan(3_000);
    for (const id of ids) {
      expect(workflow.callsFor(id)[0]?.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
      expect(workflow.callsFor(id)[0]?.ended?.how).toBe('cancelled');
    }
    expect(await lockKeys()).toEqual([]);
    expect(owner.segmentEnds).toHaveLength(20);
  });

  it("the owner's callback endpoint failing: 3 attempts each, then given up; the drain still ends in time", async () => {
    const [a] = (await setup({ LONGRUN_DRAIN_TIMEOUT_MS: '3000' })) as [Replica];
    await startRuns(a, 10);
    owner.segmentEndFailures = { remaining: 1_000, status: 503 };
    const signalledAt = Date.now();
    a.child.process.kill('SIGTERM');
    expect(await a.child.exited(6_000)).toBe(0);
    expect(Date.now() - signalledAt).toBeLessThan(4_000);
    expect(1_000 - owner.segmentEndFailures.remaining).toBe(30);
    expect(owner.segmentEnds).toHaveLength(0);
    expect(a.child.stdout()).toContain('segment-end callback lost');
    expect(await lockKeys()).toEqual([]);
  });

  it('readiness goes 503 at once and new executes get 503 DRAINING during the shutdown delay; liveness stays 200', async () => {
    const [a] = (await setup({ LONGRUN_SHUTDOWN_DELAY_MS: '1500' })) as [Replica];
    await startRuns(a, 1);
    a.child.process.kill('SIGTERM');
    await expect.poll(async () => (await request(`${a.opsUrl}/-/readiness`)).statusCode, { timeout: 1_000, interval: 20 }).toBe(503);
    expect((await request(`${a.opsUrl}/-/liveness`)).statusCode).toBe(200);
    const refused = await a.execute(String(nextWorkflow++), hang);
    expect(refused.status).toBe(503);
    // src/run/launcher.ts (drainingError): retry on another replica at once.
    expect(refused.headers['retry-after']).toBe('1');
    expect((refused.body['error'] as Record<string, unknown>)['code']).toBe('DRAINING');
    expect(await a.child.exited(10_000)).toBe(0);
  });

  it('a second signal exits at once', async () => {
    const [a] = (await setup({ LONGRUN_DRAIN_TIMEOUT_MS: '8000', LONGRUN_STOP_ACK_TIMEOUT_MS: '8000' })) as [Replica];
    workflow.ignoreStops = true;
    await startRuns(a, 3);
    a.child.process.kill('SIGTERM');
    await expect.poll(async () => (await request(`${a.opsUrl}/-/readiness`).catch(() => ({ statusCode: 0 }))).statusCode, { timeout: 1_000, interval: 20 }).not.toBe(200);
    const secondAt = Date.now();
    a.child.process.kill('SIGINT');
    await a.child.exited(3_000);
    expect(Date.now() - secondAt).toBeLessThan(1_000);
  });

  it('a blocking stream in flight ends cleanly for its caller: whole lines, then the end', async () => {
    const [a] = (await setup({ LONGRUN_KEEPALIVE_MS: '100' })) as [Replica];
    const id = String(nextWorkflow++);
    owner.configure(id, { detached: false, lockConcurrentFlow: true });
    const res = await request(`${a.url}/api/v4/ai/duo_workflows/workflows/${id}/execute`, {
      method: 'POST',
      body: JSON.stringify({ workflowMetadata: scenarioMetadata([{ op: 'checkpoint', text: 'one' }, { op: 'checkpoint', text: 'two' }, { op: 'hang' }]) }),
    });
    expect(res.statusCode).toBe(200);
    await workflow.waitFor(() => workflow.callsFor(id)[0]?.actionsSent === 2, 5_000, 'checkpoints');
    a.child.process.kill('SIGTERM');
    const text = await res.body.text();
    expect(text.endsWith('\n')).toBe(true);
    const lines = text.split('\n').filter((l) => l !== '');
    expect(lines.map((l) => (JSON.parse(l) as { newCheckpoint: { checkpoint: string } }).newCheckpoint.checkpoint)).toEqual(['one', 'two']);
    expect(workflow.callsFor(id)[0]?.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    expect(await a.child.exited(10_000)).toBe(0);
  });
});

describe('a deploy costs one resume', () => {
  it('on a drain callback the owner re-dispatches the turn to another replica, where it completes', async () => {
    const [a, b] = (await setup({}, 2)) as [Replica, Replica];
    const id = String(nextWorkflow++);
    const redispatched: Array<Promise<unknown>> = [];
    owner.onSegmentEnd = (end) => {
      if (end.workflow_id !== id || end.reason !== 'drain') return;
      // The owner's dispatcher starts the next segment at once, on a replica still serving.
      redispatched.push(b.execute(id, [{ op: 'checkpoint', text: 'resumed' }, { op: 'http', path: '/api/v4/projects/1' }, { op: 'end' }]));
    };
    expect((await a.execute(id, hang)).status).toBe(202);
    a.child.process.kill('SIGTERM');
    expect(await a.child.exited(10_000)).toBe(0);
    await owner.waitFor(() => redispatched.length === 1, 5_000, 're-dispatch');
    expect(await redispatched[0]).toMatchObject({ status: 202 });
    await workflow.waitFor(() => workflow.callsFor(id)[1]?.ended !== undefined, 5_000, 'resumed turn end');
    const calls = workflow.callsFor(id);
    expect(calls).toHaveLength(2);
    expect(calls[0]?.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    expect(calls[1]?.ended?.how).toBe('ok');
    expect(calls[1]?.actionResponses[0]?.response.httpResponse?.statusCode).toBe(200);
    await owner.waitFor(() => owner.segmentEnds.filter((e) => e.workflow_id === id).length === 2, 5_000, 'second segment end');
    expect(owner.segmentEnds.filter((e) => e.workflow_id === id).map((e) => e.reason)).toEqual(['drain', 'finished']);
  });
});
