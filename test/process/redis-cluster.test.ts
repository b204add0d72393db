/**
 * Redis Cluster (LONGRUN_REDIS_KEYS=cluster), against a real cluster of three primaries
 * and three replicas (stack/redis-cluster.ts): hash slots as the server computes
 * them, the coordination contract (batches spanning every primary included), and three
 * gateway processes — stops across replicas and slots, the actor cap, and a primary
 * failover (CLUSTER FAILOVER), then a primary killed (SIGKILL), while runs are held and
 * contenders keep trying to start the same workflows: no workflow ever has two calls open
 * at once, and new executes succeed after it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CoordinationBackend } from '../../src/coordination/backend';
import { hashSlot } from '../../src/redis/hash-slot';
import { clusterKeys } from '../../src/redis/keys';
import { RedisBackend } from '../../src/coordination/redis-backend';
import { parseRedisUrl } from '../../src/redis/url';
import type { OwnerServiceSimulator } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import type { WorkflowServiceSimulator } from '../../sandbox/workflow-sim';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';
import { startRedisCluster, type RedisClusterTopology } from '../../stack/redis-cluster';
import { coordinationContract } from '../helpers/coordination-contract';
import { storeMark } from '../helpers/store-mark';

let cluster: RedisClusterTopology;

beforeAll(async () => {
  cluster = await startRedisCluster();
}, 40_000);

afterAll(async () => {
  await cluster?.stop();
});

describe('hash slots', () => {
  it('hashSlot agrees with CLUSTER KEYSLOT; a workflow’s keys share one slot; workflows spread over every primary', async () => {
    const ids = ['1', '42', '9007199254740993', 'wf-é-ü', 'a{b}c', 'x}y', '{', '}{', ...Array.from({ length: 60 }, (_, i) => String(1_000 + i * 7919))];
    for (const id of ids) {
      const keys = [clusterKeys.lock(id), clusterKeys.stop(id), clusterKeys.run(id)];
      const slots = await Promise.all(keys.map((k) => cluster.keyslot(k)));
      expect(keys.map(hashSlot), id).toEqual(slots);
      expect(new Set(slots).size, id).toBe(1);
      expect(hashSlot(clusterKeys.actor(id))).toBe(await cluster.keyslot(clusterKeys.actor(id)));
    }
    for (const key of ['foo', 'workhorse:duoworkflow:lock:1', '{}', 'k{}x', '123456789']) expect(hashSlot(key), key).toBe(await cluster.keyslot(key));
    const primaries = new Set(await Promise.all(ids.map((id) => cluster.primaryOf(hashSlot(clusterKeys.lock(id))))));
    expect(primaries.size).toBe(3);
  });
});

// Before the contract suite, whose locks would still be there (and refuse the marking).
describe('longrun store mark on a Redis Cluster (LONGRUN_REDIS_KEYS=cluster)', () => {
  it('marks every primary, each in its lowest slot; refuses while any primary holds a lock key, naming it', async () => {
    const env = { LONGRUN_REDIS_URL: cluster.url, LONGRUN_REDIS_KEYS: 'cluster' };
    const primaries = (await cluster.clusterNodes()).filter((n) => n.role === 'master' && n.slots.length > 0);
    const markers = primaries.map((p) => ({ port: p.port, key: clusterKeys.storeMarker(Math.min(...p.slots.map(([from]) => from))) }));
    expect(await storeMark(env)).toMatchObject({ status: 0, stdout: expect.stringContaining('was marked already') });
    // Unmarked again (as a new cluster is), then marked by the command.
    for (const { port, key } of markers) await cluster.node(port).del(key);
    const marked = await storeMark(env);
    expect(marked.status).toBe(0);
    expect(marked.stdout.split('\n').filter((line) => line.endsWith('  marked'))).toHaveLength(3);
    for (const { port, key } of markers) expect(await cluster.node(port).hget(key, 'fenced_until'), key).toBe('0');
    const held = clusterKeys.lock('cluster-mark-held');
    await cluster.client().set(held, 'token');
    try {
      const refused = await storeMark(env);
      expect(refused.status).toBe(3);
      expect(refused.stderr).toContain(`127.0.0.1:${await cluster.primaryOf(hashSlot(held))}  holds 1 lock key (${held})`);
    } finally {
      await cluster.client().del(held);
    }
  });
});

describe('the lock store as a gateway sees a Cluster', () => {
  it("every primary's maxmemory-policy is read at start; the fence gauge has one series per primary locked on, each 0 on a marked Cluster", async () => {
    const backend = new RedisBackend(parseRedisUrl(cluster.url, { cluster: true }), { commandTimeoutMs: 2_000, connectTimeoutMs: 2_000 });
    try {
      expect(await backend.waitReady(10_000)).toBe(true);
      const primaries = (await cluster.clusterNodes()).filter((n) => n.role === 'master' && n.slots.length > 0).map((n) => `127.0.0.1:${n.port}`);
      expect(
        backend
          .maxmemoryPolicies()
          .map((p) => [p.primary, p.policy])
          .sort(),
      ).toEqual(primaries.map((p) => [p, 'noeviction']).sort());
      // A workflow on each primary, locked: each primary's fence heard (none is up).
      const ids: string[] = [];
      for (let n = 0; new Set(await Promise.all(ids.map((id) => cluster.primaryOf(hashSlot(clusterKeys.lock(id)))))).size < 3; n++) ids.push(`fence-gauge-${n}`);
      for (const id of ids) expect(await backend.acquire(id, 'token', 2_000)).toBe(true);
      expect(backend.storeFences().sort((a, b) => a.primary.localeCompare(b.primary))).toEqual(primaries.sort().map((primary) => ({ primary, remainingMs: 0, why: undefined })));
    } finally {
      await backend.close();
    }
  });
});

describe('coordination backend contract: redis cluster', () => {
  coordinationContract('cluster', async (): Promise<CoordinationBackend> => {
    const backend = new RedisBackend(parseRedisUrl(cluster.url, { cluster: true }), { commandTimeoutMs: 2_000, connectTimeoutMs: 2_000 });
    expect(await backend.waitReady(10_000)).toBe(true);
    return backend;
  });
});

describe('gateways on a Redis Cluster', () => {
  const LEASE_TTL_MS = 6_000;
  const hang: Step[] = [{ op: 'checkpoint', text: 'working' }, { op: 'hang' }];
  let stack: Stack<'process'>;
  let owner: OwnerServiceSimulator;
  let workflow: WorkflowServiceSimulator;
  let next = 70_000;
  const newWorkflow = (): string => String(next++);

  /** cluster-a, cluster-b, …: started by each test on this block's simulators, secret and the Cluster above; killed after it. */
  beforeAll(async () => {
    stack = await startStack({
      gateway: 'process',
      replicas: 0,
      name: 'cluster',
      redis: { url: cluster.url },
      preauth: { detached: true },
      env: {
        LONGRUN_REDIS_KEYS: 'cluster',
        LONGRUN_LEASE_TTL_MS: String(LEASE_TTL_MS),
        // Under the lease keeper's attempt timeout (TTL/6 = 1 s), as the defaults are (2 s under
        // 10 s), so a renewal to the killed primary fails before it is given up.
        LONGRUN_REDIS_COMMAND_TIMEOUT_MS: '800',
        LONGRUN_STOP_ACK_TIMEOUT_MS: '1000',
      },
    });
    ({ owner, workflow } = stack);
  });

  afterAll(async () => {
    await stack?.close();
  });

  afterEach(() => stack.closeReplicas());

  /** Workflows whose keys live on each of the three primaries, `perPrimary` of each. */
  async function workflowsOnEveryPrimary(perPrimary: number): Promise<Map<number, string[]>> {
    const byPrimary = new Map<number, string[]>();
    while ([...byPrimary.values()].filter((ids) => ids.length >= perPrimary).length < 3) {
      const id = newWorkflow();
      const primary = await cluster.primaryOf(hashSlot(clusterKeys.lock(id)));
      const ids = byPrimary.get(primary) ?? [];
      if (ids.length < perPrimary) ids.push(id);
      byPrimary.set(primary, ids);
    }
    return byPrimary;
  }

  /** Calls of one workflow that were open at the same time (a second run beside the first). */
  function overlaps(id: string): number {
    const calls = [...workflow.callsFor(id)].sort((a, b) => a.startedAt - b.startedAt);
    let count = 0;
    for (let i = 1; i < calls.length; i++) {
      const previousEnd = calls[i - 1]?.ended?.at;
      if (previousEnd === undefined || previousEnd > (calls[i]?.startedAt as number)) count += 1;
    }
    return count;
  }

  /**
   * Three gateways, twelve runs held (four on each primary), and contenders: every gateway
   * keeps trying to start every held workflow until stop() (which answers their statuses).
   */
  async function holdWithContenders() {
    const gateways = (await stack.startReplicas(3)) as [Replica, Replica, Replica];
    const byPrimary = await workflowsOnEveryPrimary(4);
    const held = [...byPrimary.values()].flat();
    for (const [i, id] of held.entries()) expect((await (gateways[i % 3] as Replica).execute(id, hang)).status).toBe(202);
    let contending = true;
    const statuses: Record<string, number> = {};
    const running = gateways.map(async (gateway) => {
      while (contending) {
        for (const id of held) {
          const { status } = await gateway.execute(id, hang);
          statuses[status] = (statuses[status] ?? 0) + 1;
        }
        await sleep(50);
      }
    });
    await sleep(1_000);
    const stop = async (): Promise<Record<string, number>> => {
      contending = false;
      await Promise.all(running);
      return statuses;
    };
    return { gateways, byPrimary, held, contenders: { stop } };
  }

  /** New workflows whose keys live on `primary`, one per gateway, each accepted (polled within `timeoutMs`). */
  async function executesOn(primary: number, gateways: Replica[], timeoutMs: number): Promise<string[]> {
    const fresh: string[] = [];
    while (fresh.length < gateways.length) {
      const id = newWorkflow();
      if ((await cluster.primaryOf(hashSlot(clusterKeys.lock(id)))) === primary) fresh.push(id);
    }
    for (const [i, id] of fresh.entries()) {
      await expect.poll(async () => (await (gateways[i] as Replica).execute(id, hang)).status, { timeout: timeoutMs, interval: 200 }).toBe(202);
    }
    return fresh;
  }

  it('a stop sent to one replica reaches the run on another, whichever primary holds its keys; a stop key set directly is polled', async () => {
    const [a, b] = (await stack.startReplicas(2, { LONGRUN_STOP_POLL_MS: '300' })) as [Replica, Replica];
    const client = cluster.client();
    for (const ids of (await workflowsOnEveryPrimary(1)).values()) {
      const id = ids[0] as string;
      expect((await b.execute(id, hang)).status).toBe(202);
      expect((await a.runRecord(id)).body).toMatchObject({ workflow_id: id, replica: 'cluster-b', state: 'running' });
      expect(await client.exists(clusterKeys.lock(id), clusterKeys.run(id))).toBe(2);
      expect((await a.stop(id)).status).toBe(202);
      await workflow.waitFor(() => (workflow.callsFor(id)[0]?.stopReasons.length ?? 0) > 0, 5_000, `stop of ${id}`);
      expect(workflow.callsFor(id)[0]?.stopReasons).toEqual(['USER_STOP']);
      await expect.poll(() => client.exists(clusterKeys.lock(id), clusterKeys.run(id), clusterKeys.stop(id)), { timeout: 3_000 }).toBe(0);
    }
    // The owner sets the (hash-tagged) stop key itself: the poll's per-primary read finds it.
    const direct = newWorkflow();
    expect((await a.execute(direct, hang)).status).toBe(202);
    await client.set(clusterKeys.stop(direct), 'OWNER_CANCEL', 'PX', 600_000);
    await workflow.waitFor(() => (workflow.callsFor(direct)[0]?.stopReasons.length ?? 0) > 0, 5_000, 'stop by key');
    expect(workflow.callsFor(direct)[0]?.stopReasons).toEqual(['OWNER_CANCEL']);
  });

  it('the per-actor cap holds across replicas and slots', async () => {
    const [a, b, c] = (await stack.startReplicas(3, { LONGRUN_MAX_RUNS_PER_ACTOR: '2' })) as [Replica, Replica, Replica];
    const ids = [newWorkflow(), newWorkflow(), newWorkflow()];
    for (const id of ids) owner.configure(id, { detached: true, actorId: 'cluster-user' });
    expect((await a.execute(ids[0] as string, hang)).status).toBe(202);
    expect((await b.execute(ids[1] as string, hang)).status).toBe(202);
    const over = await c.execute(ids[2] as string, hang);
    expect(over.status).toBe(429);
    expect((over.body['error'] as Record<string, unknown>)['code']).toBe('ACTOR_LIMIT');
    expect((await c.stop(ids[0] as string)).status).toBe(202);
    await owner.waitFor(() => owner.segmentEnds.some((e) => e.workflow_id === ids[0]), 5_000, 'first run end');
    expect((await c.execute(ids[2] as string, hang)).status).toBe(202);
  });

  it('a primary fails over (CLUSTER FAILOVER) under held runs and contenders: never two runs of a workflow; new executes succeed after', async () => {
    const { gateways, byPrimary, held, contenders } = await holdWithContenders();
    const [failedOver] = [...byPrimary.keys()];
    // Free workflows on the slots that fail over, for the fence's cost: started one after another from the switch on.
    const slots = (await cluster.clusterNodes()).find((n) => n.port === failedOver)?.slots ?? [];
    const onFailedOver = (id: string): boolean => slots.some(([from, to]) => hashSlot(clusterKeys.lock(id)) >= from && hashSlot(clusterKeys.lock(id)) <= to);
    const newPrimary = await cluster.failover(failedOver as number, 15_000);
    const failedOverAt = Date.now();
    const probes: Array<{ status: number; fence?: string }> = [];
    const probing = (async () => {
      while (probes.at(-1)?.status !== 202 && Date.now() - failedOverAt < 3 * LEASE_TTL_MS) {
        let id = newWorkflow();
        while (!onFailedOver(id)) id = newWorkflow();
        const { status, body } = await (gateways[0] as Replica).execute(id, hang);
        const fence = (body['error'] as { fence?: string } | undefined)?.fence;
        probes.push({ status, ...(fence ? { fence } : {}) });
        if (status !== 202) await sleep(100);
      }
      return Date.now() - failedOverAt;
    })();
    // Longer than a whole lease after the switch: a run still open then has renewed its
    // lease on the new primary (or it would have stopped with WORKHORSE_LOCK_LOST).
    await sleep(LEASE_TTL_MS + 1_000);
    const reopenedMs = await probing;

    // New executes for workflows whose slots moved to the new primary succeed on every gateway.
    const fresh = await executesOn(newPrimary, gateways, 5_000);
    const contenderStatuses = await contenders.stop();

    for (const id of [...held, ...fresh]) expect(overlaps(id), `workflow ${id}: ${JSON.stringify(workflow.callsFor(id).map((c) => [c.startedAt, c.ended?.at]))}`).toBe(0);
    const survived = held.filter((id) => workflow.callsFor(id).length === 1 && workflow.callsFor(id)[0]?.ended === undefined).length;
    const fenced = probes.filter((p) => p.fence !== undefined);
    console.log(
      `cluster failover of primary :${failedOver} → :${newPrimary} at ${new Date(failedOverAt).toISOString()}: ${survived} of ${held.length} held runs went on; contender answers ${JSON.stringify(contenderStatuses)}; ` +
        `free workflows on its slots: ${fenced.length} starts refused by the fence (${[...new Set(fenced.map((p) => p.fence))].join(', ')}), accepted again ${reopenedMs} ms after the switch (${LEASE_TTL_MS} ms lease)`,
    );
    expect(probes.at(-1)?.status).toBe(202);
    expect(fenced.every((p) => p.fence === 'lost')).toBe(true);
    // A manual failover loses nothing acknowledged: the held runs keep their leases.
    expect(survived).toBe(held.length);
    expect(contenderStatuses['202'] ?? 0).toBe(0);
  });

  // Last in this file: the killed node stays down (stop() removes it with the others).
  it('a primary is killed (SIGKILL) under held runs and contenders: never two runs of a workflow; a run on it goes on or is handed back; new executes succeed after', async () => {
    const { gateways, byPrimary, held, contenders } = await holdWithContenders();
    // A primary that has a replica (the manual failover above may have left one without).
    let killed: number | undefined;
    let newPrimary: number | undefined;
    for (const port of byPrimary.keys()) {
      try {
        newPrimary = await cluster.killPrimary(port, 20_000);
        killed = port;
        break;
      } catch (err) {
        if (!/no replica of a primary/.test((err as Error).message)) throw err;
      }
    }
    expect(killed, 'a primary with a replica to take over').toBeDefined();
    await sleep(LEASE_TTL_MS + 1_000);

    const fresh = await executesOn(newPrimary as number, gateways, 10_000);
    const contenderStatuses = await contenders.stop();

    for (const id of [...held, ...fresh]) expect(overlaps(id), `workflow ${id}: ${JSON.stringify(workflow.callsFor(id).map((c) => [c.startedAt, c.ended?.at]))}`).toBe(0);
    // Every first run of a held workflow either still runs or ended and was handed back to
    // the owner with a segment-end callback: none is dropped silently.
    const ended = held.filter((id) => workflow.callsFor(id)[0]?.ended !== undefined);
    await owner.waitFor(() => ended.every((id) => owner.segmentEnds.some((e) => e.workflow_id === id)), 10_000, 'a segment-end callback for every ended run');
    const onKilled = byPrimary.get(killed as number) ?? [];
    console.log(
      `cluster primary :${killed} killed → :${newPrimary}: ${held.length - ended.length} of ${held.length} held runs went on ` +
        `(${onKilled.filter((id) => !ended.includes(id)).length} of ${onKilled.length} on the killed primary); ended ${JSON.stringify(ended.map((id) => [id, owner.segmentEnds.find((e) => e.workflow_id === id)?.reason]))}; contender answers ${JSON.stringify(contenderStatuses)}`,
    );
    // Runs whose keys were on the healthy primaries are not disturbed by the crash.
    expect(ended.filter((id) => !onKilled.includes(id))).toEqual([]);
  });
});
