/**
 * The stack every test and benchmark starts (stack/): what it starts is where its options
 * say, its replicas are named as it says, a replaced replica or workflow service takes its
 * predecessor's port, and close() leaves no process and no file behind.
 */
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { Step } from '../../sandbox/scenario';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild } from '../../stack/gateway-child';

const held: Step[] = [{ op: 'checkpoint', text: 'holding' }, { op: 'hang' }];

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const stacks: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const stack of stacks.splice(0)) await stack.close();
});

describe('a stack of processes (the benchmarks’ shape)', () => {
  it('every piece in a process of its own, on its own redis-server; a replaced replica keeps its name and port, a restarted workflow service its address; close() ends every process and removes the secret file', async () => {
    const stack = await startStack({ gateway: 'process', simulators: 'process', replicas: 2, name: 'kit', redis: 'own', preauth: { detached: true, lockConcurrentFlow: true } });
    stacks.push(stack);
    const [a, b] = stack.replicas as [GatewayChild, GatewayChild];
    expect([a.name, b.name]).toEqual(['kit-a', 'kit-b']);
    const pids = stack.pids();
    expect(Object.keys(pids)).toEqual(['gateway_0', 'gateway_1', 'owner_sim', 'workflow_sim', 'redis', 'driver']);
    expect(new Set(Object.values(pids)).size).toBe(6);
    for (const pid of Object.values(pids)) expect(alive(pid)).toBe(true);

    // A run on kit-b, recorded as its own, seen by the workflow simulator over IPC.
    expect((await b.execute('kit-1', held)).status).toBe(202);
    expect((await a.runRecord('kit-1')).body).toMatchObject({ workflow_id: 'kit-1', replica: 'kit-b', state: 'running' });
    await expect.poll(async () => (await stack.workflow.query('callCounts', { prefix: 'kit-' })).withAction).toBe(1);

    const next = (await stack.restartReplica(a)) as GatewayChild;
    expect([next.name, next.port]).toEqual(['kit-a', a.port]);
    expect(alive(a.pid)).toBe(false);
    expect(stack.replicas[0]).toBe(next);
    expect(stack.replicas[1]).toBe(b);

    const address = stack.workflow.address;
    const oldWorkflow = stack.workflow.pid;
    await stack.restartWorkflow();
    expect(stack.workflow.address).toBe(address);
    expect(alive(oldWorkflow)).toBe(false);

    const started = Object.values(stack.pids()).filter((pid) => pid !== process.pid);
    await stack.close();
    for (const pid of started) expect(alive(pid), `pid ${pid}`).toBe(false);
    expect(existsSync(stack.secretFile)).toBe(false);
  });
});

describe('replicas started per test (the process tests’ shape)', () => {
  it('named by the first free letters: after closeReplicas the next test’s are named as the last test’s were', async () => {
    const stack: Stack<'process'> = await startStack({ gateway: 'process', replicas: 0, name: 'per-test' });
    stacks.push(stack);
    expect(() => stack.url).toThrow(/no replica of its own/);
    const first = await stack.startReplicas(2);
    expect(first.map((r) => r.name)).toEqual(['per-test-a', 'per-test-b']);
    await stack.closeReplicas();
    for (const replica of first) expect(replica.child.process.exitCode !== null || replica.child.process.signalCode !== null).toBe(true);
    expect(stack.replicas).toEqual([]);
    const [again] = await stack.startReplicas(1);
    expect(again?.name).toBe('per-test-a');
  });
});
