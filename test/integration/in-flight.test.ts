/**
 * "Outcome unknown" (docs/spec.md §6): a segment that ends while a relayed request or an MCP call
 * is unanswered says so — the segment-end callback's `in_flight`, and the run record's
 * while the run lives (refreshed with each lease renewal) — so the owner can tell the
 * next segment to check before repeating a write.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { LongrunClient } from '@longrun/client';
import { McpServerSimulator } from '../../sandbox/mcp-sim';
import type { SegmentEnd } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { startRedis, type RedisServer } from '../../stack/redis-server';
import { testSecret } from '../../stack/secret';
import { startStack, type Stack } from '../../stack';

let stack: Stack | undefined;
let client: LongrunClient | undefined;
let redis: RedisServer | undefined;
let mcp: McpServerSimulator | undefined;

afterEach(async () => {
  await client?.close();
  await stack?.close();
  await redis?.stop();
  await mcp?.close();
  stack = client = redis = mcp = undefined;
});

/** A 600 ms lease: renewed (and the run record's in_flight refreshed) every 200 ms. */
async function start(options: { redis?: boolean; env?: Record<string, string>; mcpUrl?: string } = {}): Promise<{ stack: Stack; client: LongrunClient }> {
  if (options.redis) redis = await startRedis();
  stack = await startStack({
    preauth: { detached: true, ...(options.mcpUrl ? { mcpServers: { sim: { URL: options.mcpUrl, Tools: ['slow'] } } } : {}) },
    // The simulated MCP server listens on loopback.
    env: { LONGRUN_LEASE_TTL_MS: '600', LONGRUN_MCP_ALLOW_PRIVATE: 'true', ...options.env },
    ...(redis ? { redis: { url: redis.url } } : {}),
  });
  client = new LongrunClient({ url: stack.url, secret: testSecret });
  return { stack, client };
}

async function segmentEnd(s: Stack, id: string): Promise<SegmentEnd> {
  await s.owner.waitFor(() => s.owner.segmentEnds.some((e) => e.workflow_id === id), 10_000, `segment end of ${id}`);
  return s.owner.segmentEnds.find((e) => e.workflow_id === id) as SegmentEnd;
}

const slowWrite = (method: string): Step[] => [
  { op: 'checkpoint', text: 'before the write' },
  { op: 'http', method, path: '/api/v4/slow?ms=10000', body: '{"title":"x"}' },
  { op: 'end' },
];

describe('in_flight', () => {
  it('a stop while a POST relay is in flight: the run record shows it while the run lives, the callback reports it, the service never got its answer', async () => {
    const { stack: s, client: c } = await start({ redis: true });
    const id = '300';
    expect((await c.execute(id, { workflowMetadata: scenarioMetadata(slowWrite('post')) })).kind).toBe('accepted');
    await s.owner.waitFor(() => s.owner.apiRequests.some((r) => r.path.startsWith('/api/v4/slow')), 5_000, 'the relay reaching the owner');
    const expected = [{ kind: 'http', request_id: '2', method: 'POST' }];
    // Written with the record or with the next renewal (every 200 ms).
    await expect.poll(async () => (await c.getRun(id))?.in_flight, { timeout: 3_000, interval: 50 }).toEqual(expected);
    expect((await c.stop(id)).kind).toBe('stop_requested');
    const end = await segmentEnd(s, id);
    expect(end.reason).toBe('stop_requested');
    expect(end.in_flight).toEqual(expected);
    const call = s.workflow.callsFor(id)[0];
    expect(call?.actionResponses.map((r) => r.requestID)).toEqual([]);
    expect(call?.stopReasons).toEqual(['USER_STOP']);
  });

  it('the run limit cutting an MCP call: reported with the tool name (in-process lock store)', async () => {
    mcp = await McpServerSimulator.start();
    const { stack: s, client: c } = await start({ env: { LONGRUN_RUN_LIMIT_MS: '800' }, mcpUrl: mcp.url });
    const id = '301';
    // Tools are offered as <server>_<tool> (docs/spec.md §2): the service calls sim_slow.
    const steps: Step[] = [{ op: 'checkpoint', text: 'go' }, { op: 'mcp', name: 'sim_slow', args: '{"ms":10000}' }, { op: 'end' }];
    expect((await c.execute(id, { workflowMetadata: scenarioMetadata(steps) })).kind).toBe('accepted');
    const end = await segmentEnd(s, id);
    expect(end.reason).toBe('run_limit');
    expect(end.in_flight).toEqual([{ kind: 'mcp', request_id: '2', method: 'sim_slow' }]);
  });

  it('answered actions are not in flight: a GET and a PUT answered before the stop leave it empty', async () => {
    const { stack: s, client: c } = await start();
    const id = '302';
    const steps: Step[] = [
      { op: 'http', method: 'GET', path: '/api/v4/projects/1' },
      { op: 'http', method: 'PUT', path: '/api/v4/echo', body: '{}' },
      { op: 'checkpoint', text: 'both answered' },
      { op: 'hang' },
    ];
    expect((await c.execute(id, { workflowMetadata: scenarioMetadata(steps) })).kind).toBe('accepted');
    await s.workflow.waitFor(() => s.workflow.callsFor(id)[0]?.actionResponses.length === 2, 5_000, 'two answers');
    await expect.poll(async () => (await c.getRun(id))?.in_flight, { timeout: 3_000, interval: 50 }).toEqual([]);
    await c.stop(id);
    const end = await segmentEnd(s, id);
    expect(end.in_flight).toEqual([]);
    expect(end.actions).toBe(3);
    expect(s.logs()).toMatch(/"msg":"run ended".*"in_flight":0|"in_flight":0.*"msg":"run ended"/);
  });
});

describe('an answer written after the stop is in flight, whatever becomes of it', () => {
  // The service acts on the stop and takes a while to end the call (the real one waits for
  // its workflow task to cancel); a relay answered meanwhile is written behind the stop on
  // the wire, and a service that reads its stream in order never reads it. The answer is
  // still forwarded, but the owner must hear that the write's outcome is unknown.
  const steps = (relayMs: number): Step[] => [
    { op: 'checkpoint', text: 'before the write' },
    { op: 'http', method: 'POST', path: `/api/v4/slow?ms=${relayMs}`, body: '{}' },
    { op: 'end' },
  ];
  const stops = {
    run_limit: { env: { LONGRUN_RUN_LIMIT_MS: '400' }, trigger: async () => undefined },
    stop_requested: { env: {}, trigger: async (_s: Stack, c: LongrunClient, id: string) => void expect((await c.stop(id)).kind).toBe('stop_requested') },
    drain: { env: {}, trigger: async (s: Stack) => void s.gateway.drain() },
    // Renewals every 2 s: a lost lease stops the run within 2 s (before the 2.5 s relay is
    // answered), and its handshake gets what is left of the 6 s lease (more than the 3 s the service takes to end).
    lock_lost: {
      env: { LONGRUN_LEASE_TTL_MS: '6000' },
      trigger: async (_s: Stack, _c: LongrunClient, id: string) => void (await redisClientOf().del(`workhorse:duoworkflow:lock:${id}`)),
    },
  } as const;
  let redisClient: Redis | undefined;
  const redisClientOf = (): Redis => redisClient as Redis;
  afterEach(() => {
    redisClient?.disconnect();
    redisClient = undefined;
  });

  it.each(Object.keys(stops) as Array<keyof typeof stops>)(
    '%s: the relay answered after the stop was sent is reported in flight, and its answer still reached the service',
    async (kind) => {
      redis = await startRedis();
      redisClient = new Redis(redis.url);
      stack = await startStack({
        preauth: { detached: true },
        redis: { url: redis.url },
        workflow: { stopEndDelayMs: kind === 'lock_lost' ? 3_000 : 1_500 },
        env: { ...stops[kind].env },
      });
      client = new LongrunClient({ url: stack.url, secret: testSecret });
      const id = String(310 + Object.keys(stops).indexOf(kind));
      expect((await client.execute(id, { workflowMetadata: scenarioMetadata(steps(kind === 'lock_lost' ? 2_500 : 1_000)) })).kind).toBe('accepted');
      await stack.owner.waitFor(() => stack!.owner.apiRequests.some((r) => r.path.startsWith('/api/v4/slow')), 5_000, 'the relay reaching the owner');
      await stops[kind].trigger(stack, client, id);
      const end = await segmentEnd(stack, id);
      expect(end.reason).toBe(kind);
      expect(end.in_flight).toEqual([{ kind: 'http', request_id: '2', method: 'POST' }]);
      const call = stack.workflow.callsFor(id)[0];
      expect(call?.stopReasons).toHaveLength(1);
      // Forwarded all the same, behind the stop: the service got it and could not use it.
      expect(call?.answersAfterStop).toEqual(['2']);
      expect(call?.actionResponses).toEqual([]);
      expect(stack.logs()).toMatch(new RegExp(`"workflow_id":"${id}"[^\\n]*"in_flight":1[^\\n]*"msg":"run ended"`));
    },
  );
});
