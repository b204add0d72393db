/**
 * The reference dispatcher (examples/dispatcher) on a real BullMQ queue and a real Redis,
 * against a real gateway and the simulators: turns resume once per boundary, a callback
 * delivered twice resumes once, a lost callback is recovered by the watchdog, a 409
 * WORKFLOW_LOCKED adopts the run in flight, a write cut by the run limit is handed
 * to the next segment as `in_flight`, and the owner's rate limit (429, Retry-After) is waited
 * out before the segment is tried again.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import express from 'express';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { LongrunClient } from '@longrun/client';
import type { Step } from '../../sandbox/scenario';
import type { CallRecord, WorkflowSimulatorOptions } from '../../sandbox/workflow-sim';
import { Dispatcher, STUCK_WORKFLOW_MS, type DispatcherEvent, type DispatcherOptions } from '../../examples/dispatcher/dispatcher';
import type { Turn } from '../../examples/dispatcher/owner-state';
import { segmentEndRoute } from '../../examples/dispatcher/segment-end-route';
import { startRedis, type RedisServer } from '../../stack/redis-server';
import { testSecret } from '../../stack/secret';
import { startStack, type Stack } from '../../stack';

const RUN_LIMIT_MS = 1_000;
const PREFIX = 'dispatcher-test';

let redis: RedisServer;
let redisClient: Redis;
let stack: Stack;
let client: LongrunClient;
let dispatcher: Dispatcher;
/** What the dispatchers did, each with when (`at`, ms since the epoch). */
const events: Array<DispatcherEvent & { at?: number }> = [];
/** Workflows whose next callback the owner "loses" (answered 204, never acted on). */
const loseNextCallback = new Set<string>();
/** Every segment-end callback as it arrived (headers and body), by workflow. */
const callbacks = new Map<string, Array<{ headers: Record<string, string>; body: string }>>();
let nextWorkflow = 20_000;
const newWorkflow = (): string => String(nextWorkflow++);
/** Workflows the owner's records say are over (what `workflowFinished` answers). */
const finishedOnService = new Set<string>();

/** A gateway on the shared Redis with the reference dispatcher in front of it, its owner's callback routes recording as above. */
async function startFleet(
  prefix: string,
  options: { env?: Record<string, string>; workflow?: WorkflowSimulatorOptions; dispatcher?: Pick<DispatcherOptions, 'watchPeriodMs' | 'lostConfirmMs'> } = {},
) {
  const stack = await startStack({
    preauth: { detached: true },
    redis: { url: redis.url },
    env: { LONGRUN_RUN_LIMIT_MS: String(RUN_LIMIT_MS), LONGRUN_LEASE_TTL_MS: '1500', ...options.env },
    ...(options.workflow ? { workflow: options.workflow } : {}),
  });
  const client = new LongrunClient({ url: stack.url, secret: testSecret });
  const dispatcher = new Dispatcher({
    client,
    redisUrl: redis.url,
    prefix,
    watchPeriodMs: 500,
    lostConfirmMs: 500,
    ...options.dispatcher,
    onEvent: (e) => events.push({ ...e, at: Date.now() }),
    workflowFinished: async (id) => finishedOnService.has(id),
  });
  const lossy = express.Router();
  lossy.post('/api/v4/internal/ai/duo_workflows/workflows/:workflow_id/segment_end', (req, res, next) => {
    const id = req.params['workflow_id'] as string;
    const seen = callbacks.get(id) ?? [];
    seen.push({ headers: { 'gitlab-workhorse-api-request': req.get('gitlab-workhorse-api-request') ?? '', 'content-type': 'application/json' }, body: req.body as string });
    callbacks.set(id, seen);
    if (!loseNextCallback.delete(id)) return next();
    res.status(204).end();
  });
  stack.owner.use(lossy);
  stack.owner.use(segmentEndRoute(dispatcher, testSecret));
  await dispatcher.ready();
  const close = async (): Promise<void> => {
    await dispatcher.close();
    await client.close();
    await stack.close();
  };
  return { stack, client, dispatcher, close };
}

let fleet: Awaited<ReturnType<typeof startFleet>>;

beforeAll(async () => {
  redis = await startRedis();
  redisClient = new Redis(redis.url);
  // The workflow simulator with the public service's allowlist: the run limit must cost a resume, never a stopped workflow.
  fleet = await startFleet(PREFIX);
  ({ stack, client, dispatcher } = fleet);
});

afterAll(async () => {
  await fleet.close();
  redisClient.disconnect();
  await redis.stop();
});

afterEach(() => {
  events.length = 0;
});

async function ended(id: string, timeoutMs = 20_000, by: Dispatcher = dispatcher): Promise<Turn> {
  let turn: Turn | null = null;
  await expect
    .poll(
      async () => {
        turn = await by.turn(id);
        return turn?.status;
      },
      { timeout: timeoutMs, interval: 100 },
    )
    .toMatch(/^(finished|stopped|failed)$/);
  return turn as unknown as Turn;
}

function metadataOf(call: CallRecord | undefined): { resume?: { after_run_id: string; reason: string; in_flight: unknown[] } } {
  return JSON.parse(call?.startRequest.workflowMetadata ?? '{}') as { resume?: { after_run_id: string; reason: string; in_flight: unknown[] } };
}

/** Calls of a workflow never overlap: each starts after the one before it ended. */
function expectNoOverlap(calls: CallRecord[]): void {
  for (let i = 1; i < calls.length; i++) expect(calls[i]?.startedAt).toBeGreaterThanOrEqual(calls[i - 1]?.ended?.at ?? Infinity);
}

describe('the reference dispatcher', () => {
  it('a turn longer than the run limit: one resume per boundary, each segment continuing where the last stopped', async () => {
    const id = newWorkflow();
    const scenario: Step[] = [{ op: 'turn', checkpoints: 12, intervalMs: 200 }, { op: 'end' }];
    expect(await dispatcher.startTurn(id, { goal: 'long', metadata: { scenario } })).toBe(true);
    expect(await dispatcher.startTurn(id, { goal: 'again' })).toBe(false);
    const turn = await ended(id);
    expect(turn).toMatchObject({ status: 'finished', endedReason: 'finished', finals: 1, finalRuns: 1, recovered: 0 });
    const calls = stack.workflow.callsFor(id);
    expect(turn.segments).toBe(calls.length);
    expect(turn.segments).toBeGreaterThanOrEqual(3);
    expect(turn.resumes).toBe(turn.segments - 1);
    expect(turn.boundaries).toBe(turn.resumes);
    // Each segment continues after the last checkpoint of the one before; together they cover every step once.
    for (let i = 1; i < calls.length; i++) expect(calls[i]?.turn?.from).toBe(calls[i - 1]?.turn?.to);
    expect(calls.at(-1)?.turn?.to).toBe(12);
    // The public service's allowlist: each run limit sent WORKHORSE_SERVER_SHUTDOWN and the workflow was never stopped.
    expect(calls.slice(0, -1).every((c) => c.stopReasons[0] === 'WORKHORSE_SERVER_SHUTDOWN' && c.ended?.code === 'UNAVAILABLE')).toBe(true);
    expect(stack.workflow.stoppedWorkflows.has(id)).toBe(false);
    // Each later segment is a resume: no new input.
    expect(calls.slice(1).every((c) => c.startRequest.goal === '')).toBe(true);
    expect(metadataOf(calls[1]).resume).toMatchObject({ reason: 'run_limit', in_flight: [] });
    expectNoOverlap(calls);
  });

  it('a callback delivered twice resumes once (the job id is the idempotency key)', async () => {
    const id = newWorkflow();
    await dispatcher.startTurn(id, { metadata: { scenario: [{ op: 'turn', checkpoints: 6, intervalMs: 250 }, { op: 'end' }] } });
    await expect.poll(() => callbacks.get(id)?.length ?? 0, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
    const first = callbacks.get(id)?.[0] as { headers: Record<string, string>; body: string };
    // The gateway retrying a callback whose answer it lost: the same body again, twice.
    for (let i = 0; i < 2; i++) {
      const res = await request(`${stack.owner.url}/api/v4/internal/ai/duo_workflows/workflows/${id}/segment_end`, { method: 'POST', headers: first.headers, body: first.body });
      expect(res.statusCode).toBe(204);
      await res.body.dump();
    }
    const turn = await ended(id);
    expect(turn.resumes).toBe(turn.boundaries);
    expect(turn.segments).toBe(stack.workflow.callsFor(id).length);
    const queue = new Queue('dispatch', { connection: redisClient, prefix: PREFIX });
    const runId = (JSON.parse(first.body) as { run_id: string }).run_id;
    expect((await queue.getJob(`resume-${id}-${runId}`))?.data).toMatchObject({ workflowId: id, after: runId });
    const resumeJobs = (await queue.getJobs(['completed', 'active', 'waiting', 'delayed', 'failed'])).filter((j) => j.id?.startsWith(`resume-${id}-`));
    expect(resumeJobs).toHaveLength(turn.resumes);
    await queue.close();
    expect(events.filter((e) => e.type === 'resume_enqueued' && e.after === runId)).toHaveLength(1);
    expectNoOverlap(stack.workflow.callsFor(id));
  });

  it('a lost callback: the watchdog finds the run gone and resumes the turn, once', async () => {
    const id = newWorkflow();
    loseNextCallback.add(id);
    await dispatcher.startTurn(id, { metadata: { scenario: [{ op: 'turn', checkpoints: 6, intervalMs: 250 }, { op: 'end' }] } });
    const turn = await ended(id);
    expect(turn).toMatchObject({ status: 'finished', recovered: 1, finals: 1 });
    expect(turn.resumes).toBe(turn.boundaries);
    expect(events).toContainEqual(expect.objectContaining({ type: 'watchdog', workflowId: id, finding: 'lost' }));
    const calls = stack.workflow.callsFor(id);
    expect(turn.segments).toBe(calls.length);
    expect(metadataOf(calls[1]).resume?.reason).toBe('lost');
    expectNoOverlap(calls);
  });

  it('the owner’s 429 (Rails’ rate limit on the execute preauth): the job is tried again no sooner than its Retry-After', async () => {
    // A client whose deadline the Retry-After passes: it gives up at once, and the job's backoff must wait instead.
    const impatient = new LongrunClient({ url: stack.url, secret: testSecret, retry: { deadlineMs: 200 } });
    const mine: DispatcherEvent[] = [];
    const other = new Dispatcher({ client: impatient, redisUrl: redis.url, prefix: `${PREFIX}-rate`, onEvent: (e) => mine.push(e) });
    stack.owner.executeRateLimit = { threshold: 1, intervalMs: 2_000 };
    try {
      await other.ready();
      // The user's one execute of the window.
      expect((await stack.execute(newWorkflow(), { steps: [{ op: 'end' }] })).statusCode).toBe(200);
      const id = newWorkflow();
      await other.startTurn(id, { metadata: { scenario: [{ op: 'checkpoint', text: 'one' }, { op: 'end' }] } });
      await expect.poll(() => mine.some((e) => e.type === 'segment_accepted' && e.workflowId === id), { timeout: 15_000, interval: 100 }).toBe(true);
      expect(mine).toContainEqual({ type: 'dispatch_error', workflowId: id, code: 'PREAUTH_DENIED', message: 'the owner refused the request (429)', willRetry: true });
      // One refused preauth, then one accepted after the Retry-After (2 s) — not BullMQ's first backoff (1 s), which the limit would refuse again.
      const asked = stack.owner.preauths.filter((p) => p.path.includes(`/workflows/${id}/`));
      expect(asked).toHaveLength(2);
      expect((asked[1]?.at ?? 0) - (asked[0]?.at ?? 0)).toBeGreaterThanOrEqual(2_000);
    } finally {
      stack.owner.executeRateLimit = undefined;
      await other.close();
      await impatient.close();
    }
  });

  it('a segment cut early whose callback is lost: the watchdog resumes it within its period, long before the run limit', async () => {
    // A 60 s run limit: looking at run limit + grace, the watchdog would first look a minute on.
    const watchPeriodMs = 400;
    const lostConfirmMs = 600;
    const slow = await startFleet(`${PREFIX}-watch`, { env: { LONGRUN_RUN_LIMIT_MS: '60000' }, dispatcher: { watchPeriodMs, lostConfirmMs } });
    try {
      const id = newWorkflow();
      loseNextCallback.add(id);
      await slow.dispatcher.startTurn(id, { metadata: { scenario: [{ op: 'turn', checkpoints: 8, intervalMs: 250 }, { op: 'end' }] } });
      await expect.poll(() => slow.stack.workflow.callsFor(id)[0]?.actionsSent ?? 0, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
      // Another holder takes the lock (for a second): the run's next renewal finds it, the run ends `lock_lost`.
      await redisClient.set(`workhorse:duoworkflow:lock:${id}`, 'someone-else', 'PX', 1_000);
      const turn = await ended(id, 20_000, slow.dispatcher);
      expect(turn).toMatchObject({ status: 'finished', recovered: 1, finals: 1 });
      const calls = slow.stack.workflow.callsFor(id);
      expect(calls.length).toBe(turn.segments);
      expect(JSON.parse(callbacks.get(id)?.[0]?.body ?? '{}')).toMatchObject({ reason: 'lock_lost' });
      expect(metadataOf(calls[1]).resume?.reason).toBe('lost');
      // From the first run's end to the watchdog's finding: one period and the confirmation, give or take a tick.
      const firstEnd = calls[0]?.ended?.at as number;
      const lost = events.find((e) => e.type === 'watchdog' && e.workflowId === id && e.finding === 'lost');
      expect((lost?.at as number) - firstEnd).toBeLessThan(watchPeriodMs + lostConfirmMs + 2_000);
      expectNoOverlap(calls);
      expect(calls.at(-1)?.turn?.to).toBe(8);
    } finally {
      await slow.close();
    }
  });

  it('a watchdog that would look after GitLab’s stuck-workflow cleanup is refused at construction', () => {
    expect(STUCK_WORKFLOW_MS).toBe(30 * 60_000);
    const options = { client, redisUrl: redis.url, prefix: `${PREFIX}-refused` };
    expect(() => new Dispatcher({ ...options, watchPeriodMs: 29 * 60_000, lostConfirmMs: 90_000 })).toThrow(RangeError);
    expect(() => new Dispatcher({ ...options, watchPeriodMs: 0 })).toThrow(RangeError);
  });

  it('409 WORKFLOW_LOCKED: the run already in flight is adopted as the turn’s segment, not retried', async () => {
    const id = newWorkflow();
    // A run started outside the dispatcher (say, a first attempt whose 202 was lost).
    const scenario: Step[] = [{ op: 'turn', checkpoints: 4, intervalMs: 200 }, { op: 'end' }];
    const orphan = await client.execute(id, { workflowMetadata: { scenario } });
    expect(orphan.kind).toBe('accepted');
    await dispatcher.startTurn(id, { metadata: { scenario } });
    const turn = await ended(id);
    expect(events).toContainEqual(expect.objectContaining({ type: 'segment_accepted', workflowId: id, adopted: true, runId: orphan.kind === 'accepted' ? orphan.runId : '' }));
    expect(turn).toMatchObject({ status: 'finished', finals: 1, finalRuns: 1 });
    expect(turn.segments).toBe(stack.workflow.callsFor(id).length);
    expectNoOverlap(stack.workflow.callsFor(id));
  });

  it('a write cut by the run limit: its callback reports it in flight and the next segment is dispatched with it', async () => {
    const id = newWorkflow();
    // Step 1's write ends at ~0.65 s; step 2's starts at ~0.7 s and is cut by the 1 s run limit.
    const scenario: Step[] = [{ op: 'turn', checkpoints: 2, intervalMs: 50, write: { method: 'PATCH', path: '/api/v4/slow?ms=600' } }, { op: 'end' }];
    await dispatcher.startTurn(id, { metadata: { scenario } });
    const turn = await ended(id);
    expect(turn.status).toBe('finished');
    const calls = stack.workflow.callsFor(id);
    const cut = calls.findIndex((c) => c.stopReasons[0] === 'WORKHORSE_SERVER_SHUTDOWN' && c.actionResponses.length < c.actionsSent - (c.turn ? c.turn.to - c.turn.from : 0));
    expect(cut).toBeGreaterThanOrEqual(0);
    const cutRun = events.find((e) => e.type === 'segment_ended' && e.workflowId === id && e.inFlight.length > 0);
    expect(cutRun).toMatchObject({ reason: 'run_limit', inFlight: [{ kind: 'http', method: 'PATCH' }] });
    const inFlight = cutRun?.type === 'segment_ended' ? cutRun.inFlight : [];
    // The write whose answer never reached the service is the one named, and the next segment is told.
    expect(inFlight[0]?.request_id).toBe(String(calls[cut]?.actionsSent ?? 0));
    expect(metadataOf(calls[cut + 1]).resume).toMatchObject({ reason: 'run_limit', in_flight: inFlight });
  });

  it('the owner stops a turn: it ends as stopped, nothing more is dispatched', async () => {
    const id = newWorkflow();
    await dispatcher.startTurn(id, { metadata: { scenario: [{ op: 'turn', checkpoints: 100, intervalMs: 100 }, { op: 'end' }] } });
    await expect.poll(async () => (await dispatcher.turn(id))?.status, { timeout: 10_000 }).toBe('running');
    expect((await client.stop(id)).kind).toBe('stop_requested');
    const turn = await ended(id);
    expect(turn).toMatchObject({ status: 'stopped', endedReason: 'stop_requested', finals: 1, segments: 1, resumes: 0 });
    await new Promise((resolve) => setTimeout(resolve, RUN_LIMIT_MS + 800));
    expect(stack.workflow.callsFor(id)).toHaveLength(1);
  });

  it('a callback flagged ended_while_stopping: the workflow is checked first — over, the turn ends; not over, it resumes once', async () => {
    // Only a stop word the service answers OK can cross an OK end unnoticed: a service that
    // allowlists WORKHORSE_RUN_LIMIT, and a gateway told so. The run limit's stop crosses
    // the service's OK end, after a checkpoint that did not end the turn.
    const allowlist = ['WORKHORSE_SERVER_SHUTDOWN', 'WORKHORSE_RUN_LIMIT'];
    const wider = await startFleet(`${PREFIX}-allowlisted`, {
      env: { LONGRUN_WORKFLOW_INFRA_STOP_REASONS: allowlist.join(',') },
      workflow: { infraStopReasons: allowlist, endsCrossingStops: true },
    });
    try {
      const over = newWorkflow();
      const notOver = newWorkflow();
      finishedOnService.add(over);
      const scenario: Step[] = [{ op: 'checkpoint', text: 'working', status: 'RUNNING' }, { op: 'hang' }];
      for (const id of [over, notOver]) await wider.dispatcher.startTurn(id, { metadata: { scenario } });
      const finished = await ended(over, 20_000, wider.dispatcher);
      expect(finished).toMatchObject({ status: 'finished', endedReason: 'finished', resumes: 0, segments: 1 });
      expect(JSON.parse(callbacks.get(over)?.[0]?.body ?? '{}')).toMatchObject({ reason: 'run_limit', ended_while_stopping: true });
      expect(events).toContainEqual(expect.objectContaining({ type: 'segment_ended', workflowId: over, reason: 'finished', checked: true }));
      // Not over: resumed, once per such segment; let it end with the next segment.
      await expect.poll(() => wider.stack.workflow.callsFor(notOver).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
      finishedOnService.add(notOver);
      const resumed = await ended(notOver, 20_000, wider.dispatcher);
      expect(resumed).toMatchObject({ status: 'finished', endedReason: 'finished' });
      expect(resumed.resumes).toBeGreaterThanOrEqual(1);
      expect(resumed.segments).toBe(resumed.resumes + 1);
      expect(metadataOf(wider.stack.workflow.callsFor(notOver)[1]).resume).toMatchObject({ reason: 'run_limit' });
      expect(callbacks.get(over)).toHaveLength(1);
    } finally {
      await wider.close();
    }
  });
});
