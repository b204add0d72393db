/**
 * Bridged re-attach (docs/spec.md §12) on the Redis deployments longrun supports besides a
 * single server: a Redis Cluster (LONGRUN_REDIS_KEYS=cluster; each replica's inbox is one
 * hash-tagged key, so each lives in one slot, possibly on another primary than the run's
 * keys) and a primary behind Sentinel, through a failover while a session is bridged —
 * the bridge carries on, or is given up and the reconnect re-attaches; either way the
 * service sees one start and every action answered once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import { inboxKey } from '../../src/redis/keys';
import { WEBSOCKET_PREAUTH } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import { metricValue, startStack, type Stack, type StackRedis } from '../../stack';
import type { RedisClusterTopology } from '../../stack/redis-cluster';
import type { SentinelTopology } from '../../stack/redis-sentinel';
import { openSession, resume, runsState, start, type Client } from '../helpers/ws-session';

let stack: Stack | undefined;
const clients: WebSocket[] = [];
const open = (s: { url: string }): Promise<Client> => openSession(s.url, clients);

afterEach(async () => {
  for (const ws of clients.splice(0)) ws.terminate();
  // The stack stops the Cluster or the Sentinel topology it started.
  await stack?.close();
  stack = undefined;
});

const ENV = {
  LONGRUN_WS_PING_MS: '100',
  LONGRUN_WS_PONG_TIMEOUT_MS: '3000',
  LONGRUN_WS_RESUME_WINDOW_MS: '20000',
  LONGRUN_STOP_ACK_TIMEOUT_MS: '2000',
  LONGRUN_LEASE_TTL_MS: '10000',
};

const twoReads: Step[] = [
  { op: 'client', action: { runReadFile: { filepath: 'a.txt' } }, expect: { plainTextResponse: { response: 'A' } } },
  { op: 'checkpoint', text: 'during' },
  { op: 'client', action: { runReadFile: { filepath: 'b.txt' } }, expect: { plainTextResponse: { response: 'B' } } },
  { op: 'end' },
];

/** Parks `id` on the stack's gateway (replica-a) and bridges a resume on a second replica to it; returns the bridged client and the first action. */
async function bridged(redis: StackRedis, id: string): Promise<{ s: Stack; client: Client; read: Record<string, unknown> }> {
  stack = await startStack({ redis, env: { ...ENV, LONGRUN_REPLICA_ID: 'replica-a' } });
  const s = stack;
  s.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-7' });
  const b = await s.startReplica({ env: { LONGRUN_REPLICA_ID: 'replica-b' } });
  const first = await open(s);
  first.send(start(id, twoReads));
  const read = await first.next('runReadFile');
  first.ws.terminate();
  await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 10_000 }).toBe('parked');
  const client = await open(b);
  client.send(resume(id));
  expect(await client.next('runReadFile')).toEqual(read);
  expect(metricValue(await s.metrics(), 'longrun_websocket_reattached_total', { how: 'bridged' })).toBe(1);
  return { s, client, read };
}

/** Answers both reads on `client` (the first one given), and expects the turn to finish there. */
async function finish(client: Client, read: Record<string, unknown>): Promise<void> {
  client.send({ actionResponse: { requestID: read['requestID'], plainTextResponse: { response: 'A' } } });
  const readB = await client.next('runReadFile', 2);
  client.send({ actionResponse: { requestID: readB['requestID'], plainTextResponse: { response: 'B' } } });
  expect(await client.closed).toEqual({ code: 1000, reason: '' });
}

describe('bridges on a Redis Cluster and behind Sentinel', () => {
  it('Redis Cluster: the replicas’ inboxes are hash-tagged keys of their own slots; the bridged turn finishes', async () => {
    const { s, client, read } = await bridged({ cluster: true }, '7101');
    const cluster = s.cluster as RedisClusterTopology;
    const slots = await Promise.all([cluster.keyslot(inboxKey('replica-a')), cluster.keyslot(inboxKey('replica-b'))]);
    expect(slots[0]).not.toBe(slots[1]);
    await finish(client, read);
    expect(s.workflow.callsFor('7101')).toHaveLength(1);
    expect(s.workflow.callsFor('7101')[0]).toMatchObject({ protocolErrors: [], ended: { how: 'ok' } });
    await expect.poll(() => s.gateway.registry.size, { timeout: 5_000 }).toBe(0);
  });

  it('Sentinel: a failover while a session is bridged costs no resume — the bridge goes on or the reconnect re-attaches', async () => {
    const { s, client, read } = await bridged({ sentinel: {} }, '7102');
    const topology = s.sentinel as SentinelTopology;
    const old = await topology.primaryPort();
    await topology.failover();
    await topology.waitForNewPrimary(old as number, 20_000);
    // Whatever the failover cost the bridge, the turn is finished by this client or its reconnect.
    const outcome = await Promise.race([client.closed.then(() => 'closed' as const), new Promise<'open'>((resolve) => setTimeout(() => resolve('open'), 1_500))]);
    let last = client;
    if (outcome === 'closed') {
      expect((await client.closed).code).toBe(1012);
      await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 15_000 }).toBe('parked');
      last = await open(s);
      last.send(resume('7102'));
      expect(await last.next('runReadFile')).toEqual(read);
    }
    await finish(last, read);
    expect(s.workflow.callsFor('7102')).toHaveLength(1);
    expect(s.workflow.callsFor('7102')[0]).toMatchObject({ protocolErrors: [], ended: { how: 'ok' } });
  });
});
