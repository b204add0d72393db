/**
 * SIGTERM always ends the process (issue [11], class 9; docs/spec.md §7): with runs in flight, a
 * workflow service that never acknowledges a stop, an owner whose callback endpoint
 * hangs, and Redis stopped, paused (SIGSTOP) or restarting, a gateway child process
 * still exits 0 within its drain budget — no connection or queued command keeps it alive.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { OwnerServiceSimulator } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import type { WorkflowServiceSimulator } from '../../sandbox/workflow-sim';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';
import type { RedisServer } from '../../stack/redis-server';

const DRAIN_TIMEOUT_MS = 2_000;
const hang: Step[] = [{ op: 'checkpoint', text: 'working' }, { op: 'hang' }];

let stack: Stack<'process'> | undefined;
let redis: RedisServer | undefined;
let owner: OwnerServiceSimulator | undefined;
let workflow: WorkflowServiceSimulator | undefined;
let replica: Replica | undefined;

afterEach(async () => {
  // The stack's own redis-server is resumed (a test may have paused it) before it is stopped.
  await stack?.close();
  stack = redis = owner = workflow = replica = undefined;
});

async function gatewayWithRuns(runs: number): Promise<Replica> {
  stack = await startStack({
    gateway: 'process',
    replicas: ['hung-drain'],
    redis: 'own',
    workflow: { ignoreStops: true },
    preauth: { detached: true },
    env: {
      LONGRUN_DRAIN_TIMEOUT_MS: String(DRAIN_TIMEOUT_MS),
      LONGRUN_STOP_ACK_TIMEOUT_MS: '10000',
      // As in production, a Redis command gives up well inside the drain budget (2 s of 8 s).
      LONGRUN_REDIS_COMMAND_TIMEOUT_MS: '500',
      LONGRUN_LOG_LEVEL: 'info',
    },
  });
  ({ redis, owner, workflow, gateway: replica } = stack);
  owner.hangSegmentEnds = true;
  const statuses = await Promise.all(Array.from({ length: runs }, (_, i) => replica!.execute(`95${i}`, hang).then((r) => r.status)));
  expect(statuses).toEqual(Array.from({ length: runs }, () => 202));
  return replica;
}

/** SIGTERM, then the exit code and how long it took. */
async function terminate(r: Replica): Promise<{ code: number | string; ms: number }> {
  const signalledAt = Date.now();
  r.child.process.kill('SIGTERM');
  const code = await r.child.exited(DRAIN_TIMEOUT_MS + 10_000);
  return { code, ms: Date.now() - signalledAt };
}

describe('SIGTERM with everything upstream hung', () => {
  it.each([
    [
      'stopped',
      async (): Promise<void> => {
        await redis!.stop();
      },
    ],
    [
      'paused (SIGSTOP)',
      async (): Promise<void> => {
        process.kill(redis!.pid as number, 'SIGSTOP');
      },
    ],
    ['restarting', async (): Promise<void> => void redis!.restart()],
  ])('Redis %s: exit 0 within the drain budget', async (_label, fault) => {
    const r = await gatewayWithRuns(5);
    await fault();
    const { code, ms } = await terminate(r);
    console.log(`drain with Redis ${_label}: exit ${code} after ${ms} ms (budget ${DRAIN_TIMEOUT_MS} ms)`);
    expect(code).toBe(0);
    expect(ms).toBeLessThan(DRAIN_TIMEOUT_MS + 1_500);
    // Every run was asked to stop, and the owner was called (its endpoint hung).
    expect(workflow!.calls.every((c) => c.stopReasons.includes('WORKHORSE_SERVER_SHUTDOWN'))).toBe(true);
    expect(owner!.segmentEndRequests.length).toBeGreaterThanOrEqual(1);
    expect(r.child.stdout()).toContain('"msg":"drain finished"');
  });
});
