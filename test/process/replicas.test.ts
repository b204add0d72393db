/**
 * Several replicas sharing one Redis (docs/spec.md §5, issue [4]): at most one run per workflow
 * ever, stops that reach the run wherever it is, leases that expire with a dead replica,
 * Redis outages, lease takeover, and the per-actor cap — with three gateway processes.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { lockKey, workhorseKeys } from '../../src/redis/keys';
import type { OwnerServiceSimulator } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import type { WorkflowServiceSimulator } from '../../sandbox/workflow-sim';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';
import type { RedisServer } from '../../stack/redis-server';

const LEASE_TTL_MS = 1_500;

let stack: Stack<'process'>;
let redis: RedisServer;
let client: Redis;
let owner: OwnerServiceSimulator;
let workflow: WorkflowServiceSimulator;
let nextWorkflow = 1_000;

const hang: Step[] = [{ op: 'checkpoint', text: 'working' }, { op: 'hang' }];
const newWorkflow = (): string => String(nextWorkflow++);

/** replica-a, replica-b, …: started by each test on the file's owner, secret and Redis; killed after it. */
beforeAll(async () => {
  stack = await startStack({
    gateway: 'process',
    replicas: 0,
    name: 'replica',
    redis: 'own',
    preauth: { detached: true },
    env: { LONGRUN_LEASE_TTL_MS: String(LEASE_TTL_MS), LONGRUN_STOP_ACK_TIMEOUT_MS: '1000' },
  });
  ({ owner, workflow } = stack);
  redis = stack.redis as RedisServer;
  client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
});

afterAll(async () => {
  client?.disconnect();
  await stack?.close();
});

afterEach(() => stack.closeReplicas());

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

describe('exclusivity across replicas', () => {
  it('300 executes for 10 workflows raced across three replicas start exactly 10 runs', async () => {
    // A lease long enough that renewals survive the burst on a loaded 2-core machine:
    // this test is about exclusivity at admission, not about lease expiry.
    const [a, b, c] = await stack.startReplicas(3, { LONGRUN_LEASE_TTL_MS: '6000' });
    const ids = Array.from({ length: 10 }, newWorkflow);
    const targets = [a, b, c] as Replica[];
    const results = await Promise.all(Array.from({ length: 300 }, (_, i) => (targets[i % 3] as Replica).execute(ids[i % 10] as string, hang)));
    const accepted = results.filter((r) => r.status === 202);
    expect(accepted).toHaveLength(10);
    expect(results.filter((r) => r.status === 409)).toHaveLength(290);
    expect(new Set(accepted.map((r) => r.body['workflow_id']))).toEqual(new Set(ids));
    for (const id of ids) expect(workflow.callsFor(id), id).toHaveLength(1);
  });
});

describe('the stop signal', () => {
  it('a stop sent to replica A reaches the run on replica C; the record and lock are gone after', async () => {
    const [a, b, c] = (await stack.startReplicas(3)) as [Replica, Replica, Replica];
    const latencies: number[] = [];
    for (let i = 0; i < 20; i++) {
      const id = newWorkflow();
      const started = await c.execute(id, hang);
      expect(started.status).toBe(202);
      const record = await b.runRecord(id);
      expect(record.status).toBe(200);
      expect(record.body).toMatchObject({ workflow_id: id, run_id: started.body['run_id'], replica: 'replica-c', transport: 'detached', state: 'running' });
      const sentAt = Date.now();
      const stop = await a.stop(id, undefined, i === 0 ? { reason: 'CANCELLED_BY_USER' } : undefined);
      expect(stop.status).toBe(202);
      await workflow.waitFor(() => (workflow.callsFor(id)[0]?.stopReceivedAt.length ?? 0) > 0, 5_000, `stop of ${id}`);
      latencies.push((workflow.callsFor(id)[0]?.stopReceivedAt[0] as number) - sentAt);
      expect(workflow.callsFor(id)[0]?.stopReasons).toEqual([i === 0 ? 'CANCELLED_BY_USER' : 'USER_STOP']);
      await owner.waitFor(() => owner.segmentEnds.some((e) => e.workflow_id === id), 5_000, `segment end of ${id}`);
      expect(owner.segmentEnds.find((e) => e.workflow_id === id)?.reason).toBe('stop_requested');
      await expect.poll(() => client.exists(lockKey(id), workhorseKeys.run(id), workhorseKeys.stop(id)), { timeout: 3_000 }).toBe(0);
      expect((await b.runRecord(id)).status).toBe(404);
    }
    latencies.sort((x, y) => x - y);
    console.log(`stop latency across replicas over ${latencies.length} runs: p50 ${percentile(latencies, 50)} ms, p99 ${percentile(latencies, 99)} ms`);
    expect(percentile(latencies, 99)).toBeLessThan(2_000);
  });

  it('a stop key set by the owner directly stops the run (pub/sub or poll)', async () => {
    const [a] = (await stack.startReplicas(1, { LONGRUN_STOP_POLL_MS: '300' })) as [Replica];
    const id = newWorkflow();
    expect((await a.execute(id, hang)).status).toBe(202);
    await client.set(workhorseKeys.stop(id), 'OWNER_CANCEL', 'PX', 600_000);
    await workflow.waitFor(() => (workflow.callsFor(id)[0]?.stopReasons.length ?? 0) > 0, 5_000, 'stop');
    expect(workflow.callsFor(id)[0]?.stopReasons).toEqual(['OWNER_CANCEL']);
    await expect.poll(() => client.exists(workhorseKeys.stop(id)), { timeout: 3_000 }).toBe(0);
  });

  it('no run in flight: 409 NOT_CANCELLABLE and nothing is set; internal routes need the owner JWT', async () => {
    const [a] = (await stack.startReplicas(1)) as [Replica];
    const id = newWorkflow();
    const stop = await a.stop(id);
    expect(stop.status).toBe(409);
    expect((stop.body['error'] as Record<string, unknown>)['code']).toBe('NOT_CANCELLABLE');
    expect(await client.exists(workhorseKeys.stop(id))).toBe(0);
    expect((await a.runRecord(id)).status).toBe(404);
    for (const token of ['', 'Bearer nope', 'Basic abc']) {
      const denied = await a.stop(id, token);
      expect(denied.status).toBe(401);
      expect(denied.body).toEqual({ error: { code: 'UNAUTHORIZED', message: 'unauthorized', retryable: false } });
    }
    const bad = await a.stop(id, undefined, { reason: 'not a token' });
    expect(bad.status).toBe(400);
  });

  it('a stop seen before acceptance answers 409 STOPPED and the stop is sent', async () => {
    const [a, b] = (await stack.startReplicas(2, { LONGRUN_ACCEPT_WAIT_MS: '5000' })) as [Replica, Replica];
    const id = newWorkflow();
    const pending = a.execute(id, [{ op: 'wait', ms: 4_000 }, { op: 'end' }]);
    await workflow.waitFor(() => workflow.callsFor(id).length === 1, 5_000, 'call start');
    expect((await b.stop(id)).status).toBe(202);
    const res = await pending;
    expect(res.status).toBe(409);
    expect((res.body['error'] as Record<string, unknown>)['code']).toBe('STOPPED');
    expect(workflow.callsFor(id)[0]?.stopReasons).toEqual(['USER_STOP']);
    expect(await client.exists(lockKey(id))).toBe(0);
  });
});

describe('keyspace notifications: longrun does not reconfigure a Redis it does not own', () => {
  // Renewals (every TTL/3) and the poll also read the stop key: both are pushed far out,
  // so a stop seen within seconds was seen through a keyspace notice.
  const slow = { LONGRUN_LEASE_TTL_MS: '60000', LONGRUN_STOP_POLL_MS: '60000' };
  const notifyFlags = async (): Promise<string> => ((await client.config('GET', 'notify-keyspace-events')) as string[])[1] ?? '';

  async function stopSeenWithin(replica: Replica, ms: number): Promise<boolean> {
    const id = newWorkflow();
    expect((await replica.execute(id, hang)).status).toBe(202);
    await client.set(workhorseKeys.stop(id), 'OWNER_CANCEL', 'PX', 600_000);
    return workflow
      .waitFor(() => (workflow.callsFor(id)[0]?.stopReasons.length ?? 0) > 0, ms, 'stop')
      .then(
        () => true,
        () => false,
      );
  }

  beforeEach(async () => {
    await client.config('SET', 'notify-keyspace-events', '');
  });

  it('by default the server keeps its configuration, and an explicit stop still arrives through pub/sub', async () => {
    const [a] = (await stack.startReplicas(1, slow)) as [Replica];
    expect(await notifyFlags()).toBe('');
    const id = newWorkflow();
    expect((await a.execute(id, hang)).status).toBe(202);
    expect((await a.stop(id)).status).toBe(202);
    await workflow.waitFor(() => (workflow.callsFor(id)[0]?.stopReasons.length ?? 0) > 0, 3_000, 'stop through the channel');
    expect(await notifyFlags()).toBe('');
  });

  it('LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS=true sets them, and a stop key set directly is seen at once', async () => {
    const [a] = (await stack.startReplicas(1, { ...slow, LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS: 'true' })) as [Replica];
    expect(await notifyFlags()).toMatch(/^(?=.*K)(?=.*\$).*$/);
    expect(await stopSeenWithin(a, 3_000)).toBe(true);
  });

  it('a server configured by its operator is used as it is, without CONFIG SET', async () => {
    await client.config('SET', 'notify-keyspace-events', 'KA');
    const [a] = (await stack.startReplicas(1, slow)) as [Replica];
    expect(await stopSeenWithin(a, 3_000)).toBe(true);
    expect(await notifyFlags()).toBe('AK');
  });
});

describe('leases', () => {
  it('SIGKILL a replica holding runs: its locks expire within one lease TTL and a new execute succeeds elsewhere', async () => {
    const [a, b] = (await stack.startReplicas(2)) as [Replica, Replica];
    const ids = [newWorkflow(), newWorkflow(), newWorkflow()];
    for (const id of ids) expect((await a.execute(id, hang)).status).toBe(202);
    expect((await b.execute(ids[0] as string, hang)).status).toBe(409);
    a.child.process.kill('SIGKILL');
    const killedAt = Date.now();
    await a.child.exited(5_000);
    await expect.poll(async () => client.exists(...ids.map(lockKey)), { timeout: LEASE_TTL_MS + 2_000, interval: 50 }).toBe(0);
    // Within one TTL (plus what it takes this test to look, on a busy machine).
    expect(Date.now() - killedAt).toBeLessThanOrEqual(LEASE_TTL_MS + 800);
    for (const id of ids) expect((await b.execute(id, hang)).status).toBe(202);
  });

  it('a lease taken over by another token stops the first run (lock_lost, sent as WORKHORSE_SERVER_SHUTDOWN to the public service)', async () => {
    const [a] = (await stack.startReplicas(1)) as [Replica];
    const id = newWorkflow();
    expect((await a.execute(id, hang)).status).toBe(202);
    await client.set(lockKey(id), 'intruder-token', 'PX', 60_000);
    await workflow.waitFor(() => (workflow.callsFor(id)[0]?.stopReasons.length ?? 0) > 0, LEASE_TTL_MS + 2_000, 'lock-lost stop');
    expect(workflow.callsFor(id)[0]?.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    await owner.waitFor(() => owner.segmentEnds.some((e) => e.workflow_id === id), 5_000, 'segment end');
    expect(owner.segmentEnds.find((e) => e.workflow_id === id)?.reason).toBe('lock_lost');
    // The intruder's lock is not touched by the release.
    expect(await client.get(lockKey(id))).toBe('intruder-token');
  });

  it('Redis paused briefly: leases survive and runs go on', async () => {
    const [a] = (await stack.startReplicas(1)) as [Replica];
    const id = newWorkflow();
    expect((await a.execute(id, hang)).status).toBe(202);
    process.kill(redis.pid as number, 'SIGSTOP');
    try {
      await sleep(600);
    } finally {
      process.kill(redis.pid as number, 'SIGCONT');
    }
    await sleep(LEASE_TTL_MS);
    expect(workflow.callsFor(id)[0]?.stopReasons).toEqual([]);
    expect(workflow.callsFor(id)[0]?.ended).toBeUndefined();
    expect(await client.exists(lockKey(id))).toBe(1);
  });

  it('Redis paused past the lease: the run stops (lock_lost) before the lease expires, never beside a second holder', async () => {
    const [a, b] = (await stack.startReplicas(2)) as [Replica, Replica];
    const id = newWorkflow();
    expect((await a.execute(id, hang)).status).toBe(202);
    const acceptedAt = Date.now();
    process.kill(redis.pid as number, 'SIGSTOP');
    try {
      await workflow.waitFor(() => workflow.callsFor(id)[0]?.ended !== undefined, LEASE_TTL_MS * 3, 'first run end');
    } finally {
      process.kill(redis.pid as number, 'SIGCONT');
    }
    const first = workflow.callsFor(id)[0];
    expect(first?.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    // Ended before its lock could have expired (acquired before acceptedAt).
    expect((first?.ended?.at as number) - acceptedAt).toBeLessThan(LEASE_TTL_MS);
    await expect.poll(() => client.exists(lockKey(id)), { timeout: LEASE_TTL_MS + 2_000 }).toBe(0);
    expect((await b.execute(id, hang)).status).toBe(202);
    const second = workflow.callsFor(id)[1];
    expect(second?.startedAt).toBeGreaterThan(first?.ended?.at as number);
  });

  it('Redis restarted empty mid-run: the holder takes its lost lock back under the store fence and its run goes on; starts elsewhere are refused meanwhile, never run beside it', async () => {
    onTestFinished(waitOutFence);
    const [a, b] = (await stack.startReplicas(2)) as [Replica, Replica];
    const id = newWorkflow();
    expect((await a.execute(id, hang)).status).toBe(202);
    await redis.restart();
    const restartedAt = Date.now();
    // The fence's cost: starts of free workflows on B, refused until the restarted Redis is a lease TTL old.
    const fresh: Array<{ at: number; status: number; fence?: string }> = [];
    const probing = (async () => {
      while (fresh.at(-1)?.status !== 202) {
        const res = await b.execute(newWorkflow(), hang);
        fresh.push({
          at: Date.now(),
          status: res.status,
          ...((res.body['error'] as { fence?: string } | undefined)?.fence ? { fence: (res.body['error'] as { fence: string }).fence } : {}),
        });
        await sleep(50);
      }
    })();
    // B keeps asking while A reconnects and renews: the store lost A's lock, yet B never gets it.
    const statuses: number[] = [];
    const until = Date.now() + 2 * LEASE_TTL_MS;
    while (Date.now() < until) {
      statuses.push((await b.execute(id, hang)).status);
      await sleep(50);
    }
    await probing;
    const fenced = fresh.filter((f) => f.fence !== undefined);
    console.log(
      `Redis restart (empty), ${LEASE_TTL_MS} ms lease: ${fenced.length} starts of free workflows refused by the fence (${[...new Set(fenced.map((f) => f.fence))].join(', ')}), ` +
        `${fresh.length - fenced.length - 1} while Redis was away; accepted again ${(fresh.at(-1)?.at ?? 0) - restartedAt} ms after the restart`,
    );
    // Its holder renewed the lock it lost: the fence, "new" at first, says the store lost its data.
    expect(fenced.at(-1)?.fence).toBe('lost');
    expect(statuses.filter((status) => status !== 503 && status !== 409)).toEqual([]);
    expect(statuses.at(-1)).toBe(409);
    // One call, never stopped: A holds the lock again.
    expect(workflow.callsFor(id)).toHaveLength(1);
    expect(workflow.callsFor(id)[0]).toMatchObject({ stopReasons: [] });
    expect(workflow.callsFor(id)[0]?.ended).toBeUndefined();
    expect(await client.get(lockKey(id))).toBeTruthy();
  });

  it('a start that reaches the emptied store before the holder can renew (the holder paused): 503 LOCK_UNAVAILABLE with the fence’s Retry-After; once the holder is back its run goes on and the start gets 409', async () => {
    onTestFinished(waitOutFence);
    // A longer lease here: the restarted store is fenced until it is a lease TTL old, and B
    // must reach it before that on a loaded machine (the holder stays paused until it does).
    const leaseTtlMs = 4_000;
    const [a, b] = (await stack.startReplicas(2, { LONGRUN_LEASE_TTL_MS: String(leaseTtlMs) })) as [Replica, Replica];
    const id = newWorkflow();
    expect((await a.execute(id, hang)).status).toBe(202);
    const holder = a.child.process.pid as number;
    process.kill(holder, 'SIGSTOP');
    let refused: Awaited<ReturnType<Replica['execute']>> | undefined;
    try {
      await redis.restart();
      // Once B is back on Redis (until then: the plain 503 of a Redis it cannot reach).
      await expect
        .poll(async () => ((refused = await b.execute(id, hang)).body['error'] as { fence?: string } | undefined)?.fence, { timeout: leaseTtlMs, interval: 20 })
        .toBeDefined();
    } finally {
      process.kill(holder, 'SIGCONT');
    }
    // Only the server's youth is known: no holder has renewed yet (it is paused).
    expect(refused?.status).toBe(503);
    expect(refused?.body).toMatchObject({ error: { code: 'LOCK_UNAVAILABLE', retryable: true, fence: 'new' } });
    // What is left of the fence: until the restarted server is a lease TTL old.
    expect(Number(refused?.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(refused?.headers['retry-after'])).toBeLessThanOrEqual(Math.ceil(leaseTtlMs / 1_000));
    // The holder, paused well inside its lease, renews as soon as it runs again and takes its lock back.
    await expect.poll(() => client.get(lockKey(id)), { timeout: leaseTtlMs * 2, interval: 50 }).toBeTruthy();
    expect((await b.execute(id, hang)).status).toBe(409);
    expect(workflow.callsFor(id)).toHaveLength(1);
    expect(workflow.callsFor(id)[0]).toMatchObject({ stopReasons: [] });
    expect(workflow.callsFor(id)[0]?.ended).toBeUndefined();
  });
});

/** The store fence a restart set (until the server is a lease TTL old, the longest lease a test here sets) is over: the next test’s first start is not refused. */
async function waitOutFence(): Promise<void> {
  await expect.poll(async () => Number((await client.hget('longrun:store', 'fenced_until')) ?? 0) <= Date.now(), { timeout: 10_000, interval: 100 }).toBe(true);
}

describe('the per-actor cap across replicas', () => {
  it('a replica that dies does not leak its actor slots: they expire with its leases', async () => {
    const [a, b] = (await stack.startReplicas(2, { LONGRUN_MAX_RUNS_PER_ACTOR: '1' })) as [Replica, Replica];
    const [first, second] = [newWorkflow(), newWorkflow()];
    for (const id of [first, second]) owner.configure(id, { detached: true, actorId: 'user-dies' });
    expect((await a.execute(first, hang)).status).toBe(202);
    expect((await b.execute(second, hang)).status).toBe(429);
    a.child.process.kill('SIGKILL');
    await a.child.exited(5_000);
    await expect.poll(async () => (await b.execute(second, hang)).status, { timeout: LEASE_TTL_MS + 3_000, interval: 250 }).toBe(202);
  });

  it('LONGRUN_MAX_RUNS_PER_ACTOR=2: the third run of an actor on any replica is 429 ACTOR_LIMIT; a slot frees when a run ends', async () => {
    const [a, b, c] = (await stack.startReplicas(3, { LONGRUN_MAX_RUNS_PER_ACTOR: '2' })) as [Replica, Replica, Replica];
    const ids = [newWorkflow(), newWorkflow(), newWorkflow()];
    for (const id of ids) owner.configure(id, { detached: true, actorId: 'user-42' });
    expect((await a.execute(ids[0] as string, hang)).status).toBe(202);
    expect((await b.execute(ids[1] as string, hang)).status).toBe(202);
    const over = await c.execute(ids[2] as string, hang);
    expect(over.status).toBe(429);
    // src/run/admission.ts: an actor at its cap is retried after 30 s.
    expect(over.headers['retry-after']).toBe('30');
    expect((over.body['error'] as Record<string, unknown>)['code']).toBe('ACTOR_LIMIT');
    expect(workflow.callsFor(ids[2] as string)).toHaveLength(0);
    expect(await client.exists(lockKey(ids[2] as string))).toBe(0);
    expect((await c.stop(ids[0] as string)).status).toBe(202);
    await owner.waitFor(() => owner.segmentEnds.some((e) => e.workflow_id === ids[0]), 5_000, 'first run end');
    expect((await c.execute(ids[2] as string, hang)).status).toBe(202);
  });
});
