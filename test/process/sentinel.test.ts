/**
 * Redis behind Sentinel, as operators run it (docs/spec.md §5, issue [9] point 7): gateway
 * processes configured with a `redis+sentinel://` URL hold detached runs while the
 * primary changes — by `SENTINEL FAILOVER` (the old primary stays up, and writable, until
 * Sentinel reconfigures it) and by SIGKILL. Other gateways keep trying to start the same
 * workflows all along, so a lock lost to a failover would show as a second run.
 *
 * What must hold: no workflow ever has two calls open at once (from the workflow
 * simulator's records), every held run either goes on or stops as lock_lost (sent as
 * WORKHORSE_SERVER_SHUTDOWN, on the public service's allowlist), and new executes are accepted once the new primary is up.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { lockKey } from '../../src/redis/keys';
import { RedisBackend } from '../../src/coordination/redis-backend';
import { parseRedisUrl } from '../../src/redis/url';
import type { OwnerServiceSimulator } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import type { WorkflowServiceSimulator, CallRecord } from '../../sandbox/workflow-sim';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';
import { holdPort } from '../../stack/ports';
import { startSentinelTopology, type SentinelTopology } from '../../stack/redis-sentinel';
import { storeMark } from '../helpers/store-mark';

/**
 * Lease TTLs, small so runs can lose their leases within the test, but inside the rule of
 * docs/operating.md (failover and reconnection well within 2/3 of the TTL) on a loaded
 * two-core machine: after SENTINEL FAILOVER the old primary takes renewals for about a
 * second before the switch is announced, and those are lost.
 */
const FAILOVER_LEASE_TTL_MS = 6_000;
const KILL_LEASE_TTL_MS = 4_000;
const DATA_PASSWORD = 'data-pw-7f3a9c';
const SENTINEL_PASSWORD = 'sentinel-pw-2b8e41';
/** Held runs per scenario, spread over the gateways. */
const HELD = 6;
const CONTEND_EVERY_MS = 300;
const PROBE_EVERY_MS = 200;
/** Generous: a failover here takes 1-3 s; a loaded machine may take much longer. */
const RECOVERY_DEADLINE_MS = 25_000;

let stack: Stack<'process'>;
let owner: OwnerServiceSimulator;
let workflow: WorkflowServiceSimulator;
let topology: SentinelTopology | undefined;
let gateways: Replica[] = [];

const hold: Step[] = [{ op: 'checkpoint', text: 'holding' }, { op: 'hang' }];
const short: Step[] = [{ op: 'checkpoint', text: 'probe' }, { op: 'end' }];

/** The file's simulators and secret; each test's gateways on its own topology. */
beforeAll(async () => {
  stack = await startStack({ gateway: 'process', replicas: 0, preauth: { detached: true } });
  ({ owner, workflow } = stack);
});

afterAll(async () => {
  await stack?.close();
});

/** Ports of killed data nodes, kept from other tests' servers until the test ends. */
const heldPorts: Array<{ close(): Promise<void> }> = [];

afterEach(async () => {
  await Promise.allSettled(heldPorts.splice(0).map((p) => p.close()));
  await stack.closeReplicas();
  gateways = [];
  await topology?.stop();
  topology = undefined;
});

async function startGateway(name: string, url: string, leaseTtlMs: number, env: Record<string, string> = {}): Promise<Replica> {
  const gateway = await stack.startReplica({
    name,
    env: {
      LONGRUN_REDIS_URL: url,
      LONGRUN_LEASE_TTL_MS: String(leaseTtlMs),
      // Under the lease keeper's attempt timeout (TTL/6), as the defaults are (2 s under 10 s).
      LONGRUN_REDIS_COMMAND_TIMEOUT_MS: String(Math.floor(leaseTtlMs / 8)),
      LONGRUN_STOP_ACK_TIMEOUT_MS: '1000',
      LONGRUN_LOG_LEVEL: 'info',
      ...env,
    },
  });
  gateways.push(gateway);
  return gateway;
}

/** Pairs of calls of one workflow that were open at the same time. */
function overlaps(calls: CallRecord[]): Array<[CallRecord, CallRecord]> {
  const found: Array<[CallRecord, CallRecord]> = [];
  const byWorkflow = new Map<string, CallRecord[]>();
  for (const call of calls) byWorkflow.set(call.workflowId, [...(byWorkflow.get(call.workflowId) ?? []), call]);
  for (const list of byWorkflow.values()) {
    list.sort((a, b) => a.startedAt - b.startedAt);
    for (let i = 1; i < list.length; i++) {
      for (let j = 0; j < i; j++) {
        const earlier = list[j] as CallRecord;
        const later = list[i] as CallRecord;
        if (earlier.ended === undefined || earlier.ended.at > later.startedAt) found.push([earlier, later]);
      }
    }
  }
  return found;
}

interface Attempt {
  gateway: string;
  workflowId: string;
  sentAt: number;
  status: number;
  code?: string;
  /** A 503 of the store fence: why it was up (`new`, `lost`). */
  fence?: string;
}

/** Runs `fn` every `everyMs` until stopped; stop() resolves once the last round is answered. */
function every(everyMs: number, fn: () => Promise<void>): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      await fn();
      await sleep(everyMs);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

async function attempt(gateway: Replica, workflowId: string, steps: Step[], into: Attempt[]): Promise<void> {
  const sentAt = Date.now();
  const res = await gateway.execute(workflowId, steps).catch(() => ({ status: 0, body: {} as Record<string, unknown> }));
  const error = res.body['error'] as Record<string, unknown> | undefined;
  const code = error?.['code'];
  const fence = error?.['fence'];
  into.push({ gateway: gateway.name, workflowId, sentAt, status: res.status, ...(typeof code === 'string' ? { code } : {}), ...(typeof fence === 'string' ? { fence } : {}) });
}

interface Outcome {
  newPort: number;
  failoverMs: number;
  recoveryMs: Record<string, number>;
  continued: number;
  lockLost: number;
  takenOver: number;
  contention: Record<number, number>;
  /** The store fence's cost: starts of free workflows (probes) it refused, and why. */
  fenced: Record<string, number>;
  /** From the first probe the fence refused to the first accepted after the last it refused (0: none). */
  fenceWindowMs: number;
}

/**
 * Holds HELD runs on `initial` gateways, disrupts the primary, and watches: contenders
 * try every held workflow on every gateway, probes start fresh workflows on each. Returns
 * the figures once every gateway is accepting again and a lease TTL more has passed.
 */
async function holdThrough(
  ids: { held: number; probes: number },
  initial: Replica[],
  leaseTtlMs: number,
  disrupt: () => Promise<void>,
  afterNewPrimary: () => Promise<void> = async () => undefined,
): Promise<Outcome> {
  const topo = topology as SentinelTopology;
  const held = Array.from({ length: HELD }, (_, i) => String(ids.held + i));
  for (const [i, id] of held.entries()) {
    const res = await (initial[i % initial.length] as Replica).execute(id, hold);
    expect(res.status, JSON.stringify(res.body)).toBe(202);
  }
  const contention: Attempt[] = [];
  const probes: Attempt[] = [];
  let round = 0;
  let nextProbe = ids.probes;
  const contenders = every(CONTEND_EVERY_MS, async () => {
    round += 1;
    await Promise.all(held.map((id, i) => attempt(gateways[(i + round) % gateways.length] as Replica, id, hold, contention)));
  });
  const prober = every(PROBE_EVERY_MS, async () => {
    await Promise.all(gateways.map((g) => attempt(g, String(nextProbe++), short, probes)));
  });

  const oldPort = (await topo.primaryPort()) as number;
  expect(oldPort).toBeDefined();
  const disruptedAt = Date.now();
  try {
    await disrupt();
    const newPort = await topo.waitForNewPrimary(oldPort, RECOVERY_DEADLINE_MS);
    const failoverMs = Date.now() - disruptedAt;
    await afterNewPrimary();

    // Recovered: each gateway's last three probes, all sent after the new primary was up, were accepted.
    const recoveredAt = Date.now();
    const recovered = (name: string): boolean => {
      const last = probes.filter((p) => p.gateway === name && p.sentAt >= recoveredAt).slice(-3);
      return last.length === 3 && last.every((p) => p.status === 202);
    };
    await expect
      .poll(() => gateways.every((g) => recovered(g.name)), { timeout: RECOVERY_DEADLINE_MS, interval: 100 })
      .toBe(true)
      .catch((err: unknown) => {
        // What each gateway answered last, and what it logged: why it did not recover.
        const last = gateways.map((g) => ({
          gateway: g.name,
          probes: probes.filter((p) => p.gateway === g.name).slice(-5),
          log: g.child.stderr().slice(-1_500) + g.child.stdout().slice(-3_000),
        }));
        throw new Error(`not every gateway recovered within ${RECOVERY_DEADLINE_MS} ms of the new primary: ${JSON.stringify(last, null, 1)}`, { cause: err });
      });
    // A lease TTL more with every contender trying: a lock lost to the failover would be taken now.
    await sleep(leaseTtlMs + 1_000);
    await Promise.all([contenders.stop(), prober.stop()]);

    const recoveryMs: Record<string, number> = {};
    for (const g of gateways) {
      const mine = probes.filter((p) => p.gateway === g.name);
      const lastFailure = mine.filter((p) => p.status !== 202).at(-1);
      const firstAfter = lastFailure ? mine.find((p) => p.sentAt > lastFailure.sentAt && p.status === 202) : undefined;
      recoveryMs[g.name] = firstAfter ? Math.max(0, firstAfter.sentAt - disruptedAt) : 0;
    }

    // Overlaps: none, over every call this scenario made (held, taken over, probes).
    const ours = workflow.calls.filter((c) => Number(c.workflowId) >= ids.held && Number(c.workflowId) < nextProbe);
    const overlapping = overlaps(ours);
    expect(overlapping.map(([a, b]) => `${a.workflowId}: [${a.startedAt}, ${a.ended?.at ?? 'open'}] and [${b.startedAt}, …]`)).toEqual([]);

    // Each held run went on (still open, never stopped) or stopped as lock_lost.
    // Which of the two is the failover's timing (a lease renewed on the new primary in time,
    // or not), so the held workflows are parted by what the workflow service saw of their
    // first call, and every workflow of each part is checked for what that part must show.
    const newPrimary = topo.node(newPort);
    const firstCall = (id: string): CallRecord | undefined => workflow.callsFor(id)[0];
    const continued = held.filter((id) => firstCall(id) !== undefined && firstCall(id)?.ended === undefined);
    const lockLost = held.filter((id) => firstCall(id)?.ended !== undefined);
    // Every held run was opened (each was accepted above): the two parts are all of them.
    expect([...continued, ...lockLost].sort(), 'held runs by how their first call stands').toEqual([...held].sort());
    for (const id of continued) {
      expect(firstCall(id)?.stopReasons, id).toEqual([]);
      // The workflow's only call (a second beside an open one is an overlap), its lock on the new primary.
      expect(workflow.callsFor(id), id).toHaveLength(1);
      expect(await newPrimary.exists(lockKey(id)), id).toBe(1);
    }
    for (const id of lockLost) {
      expect(firstCall(id)?.stopReasons, id).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
      await owner.waitFor(() => owner.segmentEnds.some((e) => e.workflow_id === id), 5_000, `segment end of ${id}`);
      expect(owner.segmentEnds.find((e) => e.workflow_id === id)?.reason, id).toBe('lock_lost');
    }
    // A workflow whose run stopped is open again only where a contender took it over: that
    // run holds the lock on the new primary. The others hold none there: the stopped run
    // gave its lock back before its callback (waited for above), or it expired, a lease
    // TTL having passed since the new primary was up; contenders are done.
    const reopened = lockLost.filter((id) => workflow.callsFor(id).some((c) => c.ended === undefined));
    const idle = lockLost.filter((id) => !reopened.includes(id));
    for (const id of reopened) expect(await newPrimary.exists(lockKey(id)), id).toBe(1);
    for (const id of idle) expect(await newPrimary.exists(lockKey(id)), id).toBe(0);
    const takenOver = contention.filter((a) => a.status === 202).length;
    // Each reopened workflow's open run is a contender's accepted execute.
    expect(reopened.length).toBeLessThanOrEqual(takenOver);
    // A contender is told the workflow is locked, or (while no primary answers) to come back.
    const statuses: Record<number, number> = {};
    for (const a of contention) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
    expect(
      Object.keys(statuses)
        .map(Number)
        .every((s) => [202, 409, 503].includes(s)),
      JSON.stringify(statuses),
    ).toBe(true);
    // Only a workflow whose run stopped can be started again (and then only once).
    expect(takenOver).toBeLessThanOrEqual(lockLost.length);

    // No password ever printed by a gateway, and the URL is shown masked.
    for (const g of gateways) {
      const output = g.child.stdout() + g.child.stderr();
      expect(output).not.toContain(DATA_PASSWORD);
      expect(output).not.toContain(SENTINEL_PASSWORD);
      expect(output).toContain('redis+sentinel://:***@');
    }
    const fencedProbes = probes.filter((p) => p.fence !== undefined);
    const fenced: Record<string, number> = {};
    for (const p of fencedProbes) fenced[p.fence as string] = (fenced[p.fence as string] ?? 0) + 1;
    const lastFenced = fencedProbes.at(-1);
    const reopenedAt = lastFenced ? probes.find((p) => p.sentAt > lastFenced.sentAt && p.status === 202)?.sentAt : undefined;
    const fenceWindowMs = fencedProbes[0] && reopenedAt ? reopenedAt - fencedProbes[0].sentAt : 0;
    return { newPort, failoverMs, recoveryMs, continued: continued.length, lockLost: lockLost.length, takenOver, contention: statuses, fenced, fenceWindowMs };
  } finally {
    await Promise.all([contenders.stop(), prober.stop()]);
  }
}

describe('Redis behind Sentinel', () => {
  it('SENTINEL FAILOVER while runs are held: no workflow ever has two runs; runs go on or stop as lock_lost; executes succeed on the new primary', async () => {
    topology = await startSentinelTopology({ password: DATA_PASSWORD, sentinelPassword: SENTINEL_PASSWORD });
    const topo = topology;
    // Allowed to configure keyspace notifications: they must follow the primary too.
    const env = { LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS: 'true' };
    const ttl = FAILOVER_LEASE_TTL_MS;
    const [a, b] = await Promise.all([startGateway('gw-a', topo.url, ttl, env), startGateway('gw-b', topo.url, ttl, env)]);
    const outcome = await holdThrough(
      { held: 7_000, probes: 7_100 },
      [a, b],
      ttl,
      () => topo.failover(),
      // A gateway started now reaches the new primary while the old one is still writable
      // (Sentinel reconfigures it seconds later): any lease left on the old primary would
      // be taken over from here.
      async () => void (await startGateway('gw-c', topo.url, ttl, env)),
    );
    console.log(`sentinel failover: ${JSON.stringify(outcome)}`);
    // CONFIG SET is not replicated: the gateways set it again on the new primary.
    const [, flags] = (await topo.node(outcome.newPort).config('GET', 'notify-keyspace-events')) as [string, string];
    expect(flags).toMatch(/^(?=.*K)(?=.*\$).*$/);
  }, 60_000);

  it('the primary SIGKILLed while runs are held: the same guarantees once Sentinel promotes the replica', async () => {
    topology = await startSentinelTopology({ password: DATA_PASSWORD, sentinelPassword: SENTINEL_PASSWORD });
    const topo = topology;
    const ttl = KILL_LEASE_TTL_MS;
    const [a, b] = await Promise.all([startGateway('gw-a', topo.url, ttl), startGateway('gw-b', topo.url, ttl)]);
    const outcome = await holdThrough({ held: 8_000, probes: 8_100 }, [a, b], ttl, async () => {
      const primary = await topo.primary();
      process.kill(primary.pid as number, 'SIGKILL');
      heldPorts.push(await holdPort(primary.port));
    });
    console.log(`sentinel primary killed: ${JSON.stringify(outcome)}`);
    // Not allowed to configure: the new primary keeps its own (empty) setting.
    expect(await topo.node(outcome.newPort).config('GET', 'notify-keyspace-events')).toEqual(['notify-keyspace-events', '']);
  }, 60_000);

  it('a failover that loses the last writes (the lock never reached the replica): the holder takes its lock back on the new primary under the store fence, and a start elsewhere is refused, never run beside it', async () => {
    topology = await startSentinelTopology({ password: DATA_PASSWORD, sentinelPassword: SENTINEL_PASSWORD });
    const topo = topology;
    const ttl = KILL_LEASE_TTL_MS;
    const [a, b] = await Promise.all([startGateway('gw-a', topo.url, ttl), startGateway('gw-b', topo.url, ttl)]);
    const id = '8500';
    expect((await a.execute(id, hold)).status).toBe(202);
    const oldPort = (await topo.primaryPort()) as number;
    const replica = topo.nodes.find((n) => n.port !== oldPort) as (typeof topo.nodes)[number];
    // The write the failover loses: the replica is made to forget the lock (and the run
    // record), as if they had been written on the primary just before the switch and never sent.
    const onReplica = topo.node(replica.port);
    await onReplica.config('SET', 'replica-read-only', 'no');
    await onReplica.del(lockKey(id), `workhorse:duoworkflow:run:${id}`);
    expect(await topo.node(oldPort).exists(lockKey(id))).toBe(1);
    await topo.failover();
    // B tries the workflow all through the switch: the old primary still has the lock, the new one is fenced, then the lock is back.
    const statuses: number[] = [];
    const until = Date.now() + 2 * ttl;
    while (Date.now() < until) {
      statuses.push((await b.execute(id, hold).catch(() => ({ status: 0 }))).status);
      await sleep(100);
    }
    const newPort = await topo.waitForNewPrimary(oldPort, RECOVERY_DEADLINE_MS);
    expect(newPort).toBe(replica.port);
    expect(statuses.filter((status) => ![409, 503, 0].includes(status))).toEqual([]);
    // One call, never stopped; its lock on the new primary again, the holder's.
    expect(workflow.callsFor(id)).toHaveLength(1);
    expect(workflow.callsFor(id)[0]).toMatchObject({ stopReasons: [] });
    expect(workflow.callsFor(id)[0]?.ended).toBeUndefined();
    expect(await topo.node(newPort).exists(lockKey(id))).toBe(1);
    expect(await topo.node(newPort).hget(`workhorse:duoworkflow:run:${id}`, 'replica')).toBe('gw-a');
    expect(a.child.stdout()).toContain('the lock store lost its data');
  }, 60_000);

  it('a closed backend leaves no connection open, the failover detector’s Sentinel connections included', async () => {
    topology = await startSentinelTopology({ password: DATA_PASSWORD, sentinelPassword: SENTINEL_PASSWORD });
    const sockets = (): number => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
    const before = sockets();
    const backend = new RedisBackend(parseRedisUrl(topology.url), { commandTimeoutMs: 2_000, connectTimeoutMs: 2_000 });
    expect(await backend.waitReady(5_000)).toBe(true);
    expect(await backend.acquire('9000', 'token', 10_000)).toBe(true);
    // Two connections to the primary, and the detector subscribed on each of the three Sentinels for both.
    await expect.poll(sockets, { timeout: 5_000 }).toBeGreaterThanOrEqual(before + 2 + 2 * 3);
    await backend.close();
    await expect.poll(sockets, { timeout: 5_000 }).toBe(before);
  });

  it('longrun store mark through Sentinel (redis+sentinel:// with both passwords): marks the primary Sentinel names', async () => {
    topology = await startSentinelTopology({ password: DATA_PASSWORD, sentinelPassword: SENTINEL_PASSWORD });
    const primary = (await topology.primaryPort()) as number;
    // Unmarked, as a new primary is (the topology's helper marked it).
    await topology.node(primary).del('longrun:store');
    const marked = await storeMark({ LONGRUN_REDIS_URL: topology.url });
    expect(marked.stdout).toMatch(new RegExp(`is marked as a new store: gateways grant its first locks at once\\n  127\\.0\\.0\\.1:${primary}  marked\\n$`));
    expect(marked.stdout).not.toContain(DATA_PASSWORD);
    expect(marked.status).toBe(0);
    expect(await topology.node(primary).hget('longrun:store', 'fenced_until')).toBe('0');
  });

  it('rediss+sentinel://: TLS to the Sentinels and the primary, trusting a private CA through NODE_EXTRA_CA_CERTS', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'longrun-redis-tls-'));
    try {
      const certFile = path.join(dir, 'cert.pem');
      const keyFile = path.join(dir, 'key.pem');
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'rsa:2048',
          '-nodes',
          '-keyout',
          keyFile,
          '-out',
          certFile,
          '-days',
          '1',
          '-subj',
          '/CN=localhost',
          '-addext',
          'subjectAltName=DNS:localhost,IP:127.0.0.1',
        ],
        { stdio: 'ignore' },
      );
      topology = await startSentinelTopology({ password: DATA_PASSWORD, sentinelPassword: SENTINEL_PASSWORD, tls: { certFile, keyFile } });
      expect(topology.url).toMatch(/^rediss\+sentinel:\/\//);
      const gateway = await startGateway('gw-tls', topology.url, KILL_LEASE_TTL_MS, { NODE_EXTRA_CA_CERTS: certFile });
      expect((await gateway.execute('9100', hold)).status).toBe(202);
      const primaryTlsPort = await topology.primaryPort();
      expect(await topology.node(primaryTlsPort as number).exists(lockKey('9100'))).toBe(1);
      // The gateway reached the primary on its TLS port (the plain one is never handed out).
      expect(gateway.child.stdout()).toContain(`"primary":"127.0.0.1:${primaryTlsPort}"`);
      expect(gateway.child.stdout()).toContain('rediss+sentinel://:***@');
      expect(gateway.child.stdout() + gateway.child.stderr()).not.toMatch(new RegExp(`${DATA_PASSWORD}|${SENTINEL_PASSWORD}`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
