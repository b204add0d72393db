/**
 * Following a run (docs/spec.md §14), bullet by bullet: the route (Server-Sent Events, the
 * owner's preauth, a denial passed through), the events and their ids, resuming from an id
 * (replayed, or resynced from the latest checkpoint), following a workflow across its
 * segments and replicas until `idle`, what a run nobody follows costs (nothing: INFO
 * commandstats and the follow's own structures), the slow follower dropped while the run goes
 * on, the caps, the drain, the metrics and /runs. Real gateways (in this process), the
 * simulators and a redis-server; an SSE client written from the format (helpers/sse.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import { request } from 'undici';
import { WEBSOCKET_PREAUTH } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import { INTEREST_TTL_MS } from '../../src/follow/hub';
import { followPath, firstGap, openSse, type SseEvent, type SseStream } from '../helpers/sse';
import { metricValue, ndjsonLines, startStack, type Replica, type Stack } from '../../stack';
import { openSession, resume, runsState, start } from '../helpers/ws-session';

let stack: Stack | undefined;
const streams: SseStream[] = [];
const sockets: WebSocket[] = [];
let nextWorkflow = 9_000;
const newWorkflow = (): string => String(nextWorkflow++);

afterEach(async () => {
  for (const s of streams.splice(0)) s.close();
  for (const ws of sockets.splice(0)) ws.terminate();
  await stack?.close();
  stack = undefined;
});

async function followStack(env: Record<string, string> = {}, redis = true): Promise<Stack> {
  stack = await startStack({ redis: redis ? 'own' : 'none', preauth: { detached: true }, env: { LONGRUN_LOG_LEVEL: 'warn', ...env } });
  return stack;
}

async function follow(base: { url: string }, workflowId: string, query = '', headers: Record<string, string> = {}, read = true): Promise<SseStream> {
  const stream = await openSse(`${base.url}${followPath(workflowId, query)}`, headers, { read });
  streams.push(stream);
  return stream;
}

async function detached(s: Stack | Replica, workflowId: string, steps: Step[], goal = 'test goal'): Promise<string> {
  const res = await request(`${s.url}/api/v4/ai/duo_workflows/workflows/${workflowId}/execute`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ goal, workflowMetadata: JSON.stringify({ scenario: steps }) }),
  });
  const body = (await res.body.json()) as Record<string, string>;
  expect(res.statusCode, JSON.stringify(body)).toBe(202);
  return body['run_id'] as string;
}

const kinds = (events: readonly SseEvent[]): string[] => events.map((e) => e.event);
const hasIdle = (events: readonly SseEvent[]): boolean => events.some((e) => e.event === 'idle');

/** Waits until the run in flight of `workflowId` has been reported to its log (its `run` event is in the stream). */
const running = (stream: SseStream, runId?: string): Promise<void> =>
  stream.waitFor((events) => events.some((e) => e.event === 'run' && (runId === undefined || e.json['run_id'] === runId)), 10_000, 'the run event');

/** Commandstats counts by command name. */
async function commandstats(s: Stack): Promise<Record<string, number>> {
  const text = (await s.client?.info('commandstats')) ?? '';
  const out: Record<string, number> = {};
  for (const match of text.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) out[match[1] as string] = Number(match[2]);
  return out;
}

function delta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, calls] of Object.entries(after)) if (calls !== (before[name] ?? 0)) out[name] = calls - (before[name] ?? 0);
  return out;
}

describe('the route', () => {
  it('is Server-Sent Events, preauthorized by the owner as a GET of its path and query with the caller’s headers', async () => {
    const s = await followStack();
    const id = newWorkflow();
    await detached(s, id, [{ op: 'checkpoint', text: 'one' }, { op: 'hang' }]);
    const stream = await follow(s, id, '?client=ui', { 'private-token': 'user-token', origin: 'https://gitlab.example.com' });
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(stream.headers['cache-control']).toBe('no-cache, no-transform');
    expect(stream.headers['x-request-id']).toEqual(expect.any(String));
    await running(stream);
    const preauth = s.owner.preauths.at(-1);
    expect(`${preauth?.method} ${preauth?.path}`).toBe(`GET ${followPath(id, '?client=ui')}`);
    expect(preauth?.headers['private-token']).toBe('user-token');
    expect(preauth?.headers['gitlab-workhorse-api-request']).toEqual(expect.any(String));
    expect(preauth?.body).toBe('');
  });

  it('passes the owner’s denial through (status, headers, body) and opens nothing', async () => {
    const s = await followStack();
    const id = newWorkflow();
    s.owner.configure(id, { deny: { status: 403, body: '{"message":"403 Forbidden"}', headers: { 'WWW-Authenticate': 'Bearer realm="gitlab"' } } });
    const stream = await follow(s, id);
    expect(stream.status).toBe(403);
    expect(stream.body).toBe('{"message":"403 Forbidden"}');
    expect(stream.headers['www-authenticate']).toBe('Bearer realm="gitlab"');
    expect(stream.headers['x-longrun-error-code']).toBe('PREAUTH_DENIED');
    expect(s.gateway.follow.stats).toMatchObject({ followers: 0, feeds: 0 });
  });

  it('refuses a position that is not an event id (400) before asking the owner', async () => {
    const s = await followStack();
    const stream = await follow(s, newWorkflow(), '?after=yesterday');
    expect(stream.status).toBe(400);
    expect(JSON.parse(stream.body)).toMatchObject({ error: { code: 'INVALID_REQUEST' } });
    expect(s.owner.preauths).toEqual([]);
  });

  it('is not …/events, which Rails serves: a GET there, a run in flight or not, is longrun’s 404 and reaches no follow', async () => {
    const s = await followStack();
    const id = newWorkflow();
    await detached(s, id, [{ op: 'checkpoint', text: 'one' }, { op: 'hang' }]);
    const preauthsBefore = s.owner.preauths.length;
    const res = await request(`${s.url}/api/v4/ai/duo_workflows/workflows/${id}/events`, { headers: { accept: 'text/event-stream' } });
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(((await res.body.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
    expect(s.owner.preauths.length).toBe(preauthsBefore);
    expect(s.gateway.follow.stats).toMatchObject({ followers: 0, feeds: 0 });
  });
});

describe('the events', () => {
  it('run, checkpoint (its ndjson line), action (kind and request id only), end (the callback’s reason and in_flight), then idle; ids increase by one', async () => {
    const s = await followStack();
    const id = newWorkflow();
    const steps: Step[] = [
      { op: 'checkpoint', text: 'one' },
      { op: 'wait', ms: 400 },
      { op: 'http', method: 'POST', path: '/api/v4/echo', body: '{"secret":"payload"}' },
      { op: 'checkpoint', text: 'two', status: 'FINISHED' },
      { op: 'end' },
    ];
    const runId = await detached(s, id, steps);
    const stream = await follow(s, id);
    await stream.waitFor(hasIdle, 10_000, 'idle');
    expect(await stream.closed).toBe('ended');
    expect(kinds(stream.events)).toEqual(['run', 'action', 'checkpoint', 'end', 'idle']);
    const [run, action, checkpoint, end, idle] = stream.events as [SseEvent, SseEvent, SseEvent, SseEvent, SseEvent];
    expect(run.json).toEqual({ run_id: runId, transport: 'detached', replica: s.gateway.config.replicaId, started_at: expect.any(String), state: 'running' });
    expect(action.json).toEqual({ run_id: runId, kind: 'runHTTPRequest', request_id: '2' });
    expect(action.data).not.toContain('payload');
    // The same Action a blocking caller gets as an ndjson line.
    const blockingId = newWorkflow();
    s.owner.configure(blockingId, { detached: false });
    const blocking = await s.executeText(blockingId, { body: { goal: 'test goal', workflowMetadata: JSON.stringify({ scenario: steps }) } });
    const lines = ndjsonLines(blocking.text)
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(checkpoint.json).toEqual(lines[1]);
    await s.owner.waitFor(() => s.owner.segmentEnds.some((e) => e.workflow_id === id), 5_000, 'the callback');
    const callback = s.owner.segmentEnds.find((e) => e.workflow_id === id);
    expect(end.json).toEqual({ run_id: runId, reason: callback?.reason, in_flight: callback?.in_flight, resumable: false });
    expect(idle.id).toBeUndefined();
    expect(idle.json).toEqual({ workflow_id: id });
    expect(firstGap(stream.events)).toBeUndefined();
    expect(run.id).toBeGreaterThan(1_700_000_000_000_000);
  });

  it('a comment line every LONGRUN_FOLLOW_KEEPALIVE_MS', async () => {
    const s = await followStack({ LONGRUN_FOLLOW_KEEPALIVE_MS: '100' });
    const id = newWorkflow();
    await detached(s, id, [{ op: 'checkpoint', text: 'one' }, { op: 'hang' }]);
    const stream = await follow(s, id);
    await stream.waitFor(() => stream.comments.length >= 3, 5_000, 'three keepalives');
    expect(stream.comments.slice(0, 3)).toEqual(['keepalive', 'keepalive', 'keepalive']);
  });

  it('parked and attached, as a WebSocket run loses its connection and a client re-attaches', async () => {
    const s = await followStack({ LONGRUN_WS_RESUME_WINDOW_MS: '5000' });
    s.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-7' });
    const id = newWorkflow();
    const first = await openSession(s.url, sockets);
    first.send(start(id, [{ op: 'client', action: { runReadFile: { filepath: 'a' } } }, { op: 'checkpoint', text: 'done', status: 'FINISHED' }, { op: 'end' }]));
    const read = await first.next('runReadFile');
    const stream = await follow(s, id);
    await running(stream);
    first.ws.terminate();
    await stream.waitFor((events) => events.some((e) => e.event === 'parked'), 5_000, 'parked');
    const second = await openSession(s.url, sockets);
    second.send(resume(id));
    await second.next('runReadFile');
    second.send({ actionResponse: { requestID: read['requestID'], plainTextResponse: { response: 'A' } } });
    await stream.waitFor(hasIdle, 10_000, 'idle');
    expect(kinds(stream.events)).toEqual(['run', 'parked', 'attached', 'checkpoint', 'end', 'idle']);
    const runId = stream.events[0]?.json['run_id'];
    expect(stream.events[1]?.json).toEqual({ run_id: runId, parked_at: expect.any(String) });
    expect(stream.events[2]?.json).toEqual({ run_id: runId });
    expect(stream.events[0]?.json['transport']).toBe('websocket');
  });
});

describe('resuming', () => {
  const steps: Step[] = [
    { op: 'checkpoint', text: 'c1' },
    { op: 'wait', ms: 300 },
    ...Array.from({ length: 6 }, (_, i): Step => ({ op: 'checkpoint', text: `c${i + 2}` })),
    { op: 'http', path: '/api/v4/projects/1' },
    { op: 'checkpoint', text: 'last', status: 'FINISHED' },
    { op: 'end' },
  ];

  /** A finished run followed from its second event: the whole log, as a first follower saw it. */
  async function followed(s: Stack, id: string): Promise<SseEvent[]> {
    await detached(s, id, steps);
    const stream = await follow(s, id);
    await stream.waitFor(hasIdle, 10_000, 'idle');
    return stream.events.filter((e) => e.id !== undefined);
  }

  it('Last-Event-ID or ?after=N replays what came after N, then idle; the header wins over the query', async () => {
    // No run in flight after the replay: each stream waits this long for the next, then ends idle.
    const s = await followStack({ LONGRUN_FOLLOW_IDLE_MS: '400' });
    const id = newWorkflow();
    const all = await followed(s, id);
    expect(all.length).toBeGreaterThanOrEqual(8);
    const n = all[2]?.id as number;
    const byQuery = await follow(s, id, `?after=${n}`);
    await byQuery.waitFor(hasIdle, 5_000, 'idle');
    const byHeader = await follow(s, id, '?after=1', { 'last-event-id': String(n) });
    await byHeader.waitFor(hasIdle, 5_000, 'idle');
    for (const stream of [byQuery, byHeader]) {
      expect(stream.events.slice(0, -1).map((e) => [e.id, e.event, e.data])).toEqual(all.slice(3).map((e) => [e.id, e.event, e.data]));
      expect(stream.events.at(-1)?.event).toBe('idle');
    }
    // Up to date: nothing replayed, and no run in flight.
    const current = await follow(s, id, `?after=${all.at(-1)?.id}`);
    await current.waitFor(hasIdle, 5_000, 'idle');
    expect(kinds(current.events)).toEqual(['idle']);
  });

  it('an id older than the backlog starts from the latest checkpoint marked resync; nothing duplicated or reordered', async () => {
    const s = await followStack({ LONGRUN_FOLLOW_BACKLOG_EVENTS: '3', LONGRUN_FOLLOW_IDLE_MS: '400' });
    const id = newWorkflow();
    const all = await followed(s, id);
    const resumed = await follow(s, id, `?after=${all[1]?.id}`);
    await resumed.waitFor(hasIdle, 5_000, 'idle');
    const [first, ...rest] = resumed.events;
    // The backlog holds the action, the last checkpoint and the end; the latest checkpoint
    // (the last one) stands for what is gone, then what follows it.
    expect(first?.event).toBe('checkpoint');
    expect(first?.json['resync']).toBe(true);
    expect((first?.json['newCheckpoint'] as Record<string, unknown>)['checkpoint']).toBe('last');
    expect(kinds(rest)).toEqual(['end', 'idle']);
    const ids = resumed.events.flatMap((e) => (e.id === undefined ? [] : [e.id]));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids[0]).toBeGreaterThan(all[1]?.id as number);
    const metrics = await s.metrics();
    expect(metricValue(metrics, 'longrun_follow_resyncs_total')).toBe(1);
  });
});

describe('across segments and replicas', () => {
  it('no run in flight: the stream opens and waits LONGRUN_FOLLOW_IDLE_MS for one, then ends idle', async () => {
    const s = await followStack({ LONGRUN_FOLLOW_IDLE_MS: '800' });
    const opened = performance.timeOrigin + performance.now();
    const stream = await follow(s, newWorkflow());
    expect(stream.status).toBe(200);
    expect(s.gateway.follow.stats).toMatchObject({ followers: 1 });
    await stream.waitFor(hasIdle, 5_000, 'idle');
    expect(kinds(stream.events)).toEqual(['idle']);
    // It waited the window out (a lower bound only: a loaded machine makes it later, never sooner).
    expect((stream.events[0] as SseEvent).at - opened).toBeGreaterThanOrEqual(750);
    expect(await stream.closed).toBe('ended');
    expect(s.gateway.follow.stats).toMatchObject({ followers: 0, feeds: 0 });
  });

  it('open the follow, then dispatch: the run from its `run` event on, its first checkpoint included, on the follow’s replica and on another', async () => {
    const s = await followStack({ LONGRUN_REPLICA_ID: 'follow-a' });
    const peer = await s.startReplica({ env: { LONGRUN_REPLICA_ID: 'follow-b' } });
    const turn: Step[] = [{ op: 'checkpoint', text: 'first' }, { op: 'checkpoint', text: 'second' }, { op: 'checkpoint', text: 'last', status: 'FINISHED' }, { op: 'end' }];
    // The follow on A, each run on A, then B, then B again after a finished run of the workflow was followed.
    for (const [runOn, id] of [
      [s, newWorkflow()],
      [peer, newWorkflow()],
      [peer, newWorkflow()],
    ] as const) {
      const stream = await follow(s, id);
      // The head is written: the dispatch goes at once, as a client's next line would.
      const runId = await detached(runOn, id, turn);
      await stream.waitFor(hasIdle, 10_000, 'idle');
      expect(kinds(stream.events)).toEqual(['run', 'checkpoint', 'checkpoint', 'checkpoint', 'end', 'idle']);
      expect(stream.events[0]?.json).toMatchObject({ run_id: runId, replica: runOn === s ? 'follow-a' : 'follow-b' });
      const texts = stream.events.filter((e) => e.event === 'checkpoint').map((e) => (e.json['newCheckpoint'] as Record<string, unknown>)['checkpoint']);
      expect(texts).toEqual(['first', 'second', 'last']);
      expect(firstGap(stream.events)).toBeUndefined();
    }
  });

  it('a follow opened after a finished run waits for the next one instead of ending', async () => {
    const s = await followStack();
    const id = newWorkflow();
    const first = await follow(s, id);
    await detached(s, id, [{ op: 'checkpoint', text: 'one', status: 'FINISHED' }, { op: 'end' }]);
    await first.waitFor(hasIdle, 10_000, 'idle');
    const second = await follow(s, id);
    // The finished run's latest run and checkpoint and what followed (its end), as any follow's start, then the wait: no idle.
    await second.waitFor((events) => events.some((e) => e.event === 'end'), 5_000, 'the finished run');
    const runId = await detached(s, id, [{ op: 'checkpoint', text: 'two', status: 'FINISHED' }, { op: 'end' }]);
    await second.waitFor(hasIdle, 10_000, 'idle');
    expect(kinds(second.events)).toEqual(['run', 'checkpoint', 'end', 'run', 'checkpoint', 'end', 'idle']);
    expect(second.events[3]?.json['run_id']).toBe(runId);
    expect((second.events[4]?.json['newCheckpoint'] as Record<string, unknown>)['checkpoint']).toBe('two');
    expect(firstGap(second.events)).toBeUndefined();
  });

  it('after a resumable end the stream stays open and follows the next run on another replica, until a final end', async () => {
    const s = await followStack({ LONGRUN_RUN_LIMIT_MS: '1200', LONGRUN_REPLICA_ID: 'follow-a' });
    const peer = await s.startReplica({ env: { LONGRUN_REPLICA_ID: 'follow-b', LONGRUN_RUN_LIMIT_MS: '60000' } });
    const id = newWorkflow();
    const turn: Step[] = [{ op: 'turn', checkpoints: 12, intervalMs: 200 }, { op: 'end' }];
    // The owner dispatches the next segment to the other replica.
    s.owner.onSegmentEnd = (end) => {
      if (end.workflow_id === id && end.reason === 'run_limit') void detached(peer, id, turn, '');
    };
    const first = await detached(s, id, turn);
    const stream = await follow(peer, id);
    await stream.waitFor(hasIdle, 20_000, 'idle');
    const runs = stream.events.filter((e) => e.event === 'run');
    expect(runs.map((e) => [e.json['run_id'] === first, e.json['replica']])).toEqual([
      [true, 'follow-a'],
      [false, 'follow-b'],
    ]);
    const ends = stream.events.filter((e) => e.event === 'end');
    expect(ends.map((e) => [e.json['reason'], e.json['resumable']])).toEqual([
      ['run_limit', true],
      ['finished', false],
    ]);
    // One stream: every checkpoint of the turn once, in order, after the first one seen; no id skipped.
    const steps = stream.events.filter((e) => e.event === 'checkpoint').map((e) => (e.json['newCheckpoint'] as Record<string, string>)['checkpoint']);
    const from = Number(/step (\d+)/.exec(steps[0] ?? '')?.[1]);
    expect(steps).toEqual(Array.from({ length: 13 - from }, (_, i) => `step ${from + i}/12`));
    expect(firstGap(stream.events)).toBeUndefined();
    expect(kinds(stream.events).at(-1)).toBe('idle');
  });

  it('after a resumable end and no next run within LONGRUN_FOLLOW_IDLE_MS: idle, and the stream ends', async () => {
    const s = await followStack({ LONGRUN_RUN_LIMIT_MS: '600', LONGRUN_FOLLOW_IDLE_MS: '700' });
    const id = newWorkflow();
    await detached(s, id, [{ op: 'checkpoint', text: 'one' }, { op: 'hang' }]);
    const stream = await follow(s, id);
    await stream.waitFor((events) => events.some((e) => e.event === 'end'), 5_000, 'the end');
    const endAt = stream.events.find((e) => e.event === 'end')?.at as number;
    await stream.waitFor(hasIdle, 5_000, 'idle');
    expect(kinds(stream.events)).toEqual(['run', 'end', 'idle']);
    expect(stream.events[1]?.json).toMatchObject({ reason: 'run_limit', resumable: true });
    expect((stream.events[2]?.at as number) - endAt).toBeGreaterThanOrEqual(650);
    expect(await stream.closed).toBe('ended');
  });

  it('what the channel lost while a replica’s subscription was down is read from the log: no gap, no repeat', async () => {
    const s = await followStack({ LONGRUN_REPLICA_ID: 'holder' });
    const peer = await s.startReplica({ env: { LONGRUN_REPLICA_ID: 'follower' } });
    const id = newWorkflow();
    await detached(s, id, [
      { op: 'checkpoint', text: 'start' },
      {
        op: 'repeat',
        times: 30,
        steps: [
          { op: 'checkpoint', text: 'step' },
          { op: 'wait', ms: 50 },
        ],
      },
      { op: 'checkpoint', text: 'done', status: 'FINISHED' },
      { op: 'end' },
    ]);
    const stream = await follow(peer, id);
    await stream.waitFor((events) => events.filter((e) => e.event === 'checkpoint').length >= 5, 5_000, 'a few steps');
    // Every subscriber connection cut (what a Redis restart or a network blip does to them): they reconnect.
    const killed = (await s.client?.client('KILL', 'TYPE', 'pubsub')) as number;
    expect(killed).toBeGreaterThan(0);
    await stream.waitFor(hasIdle, 15_000, 'idle');
    expect(firstGap(stream.events)).toBeUndefined();
    const steps = stream.events.filter((e) => e.event === 'checkpoint');
    expect(steps.at(-1)?.json['newCheckpoint']).toMatchObject({ checkpoint: 'done' });
    expect(steps.length).toBeGreaterThanOrEqual(26);
    expect(steps.every((e) => e.json['resync'] === undefined)).toBe(true);
  });

  it('a follow on one replica follows a run on another: the holder is found by its interest, not asked', async () => {
    const s = await followStack({ LONGRUN_REPLICA_ID: 'holder' });
    const peer = await s.startReplica({ env: { LONGRUN_REPLICA_ID: 'follower' } });
    const id = newWorkflow();
    await detached(s, id, [{ op: 'checkpoint', text: 'one' }, { op: 'wait', ms: 500 }, { op: 'checkpoint', text: 'two', status: 'FINISHED' }, { op: 'end' }]);
    const stream = await follow(peer, id);
    await stream.waitFor(hasIdle, 10_000, 'idle');
    expect(kinds(stream.events)).toEqual(['run', 'checkpoint', 'end', 'idle']);
    expect(stream.events[0]?.json['replica']).toBe('holder');
    // The holder counts the follower on the other replica in /runs.
    expect(s.gateway.follow.followersOf(id)).toBe(1);
  });
});

describe('a run nobody follows', () => {
  it('costs no Redis command (INFO commandstats) and holds nothing of the follow; the same run followed does', async () => {
    const s = await followStack();
    const steps: Step[] = [
      { op: 'checkpoint', text: 'one' },
      { op: 'http', path: '/api/v4/projects/1' },
      { op: 'wait', ms: 300 },
      { op: 'checkpoint', text: 'two', status: 'FINISHED' },
      { op: 'end' },
    ];
    const unfollowed = newWorkflow();
    // Once the follow's start-up is over (its hello: every replica, announce what you follow).
    await expect.poll(async () => (await commandstats(s))['publish'] ?? 0, { timeout: 5_000 }).toBeGreaterThan(0);
    const before = await commandstats(s);
    await detached(s, unfollowed, steps);
    const during = s.gateway.follow.stats;
    await s.owner.waitFor(() => s.owner.segmentEnds.some((e) => e.workflow_id === unfollowed), 5_000, 'the end');
    const quiet = delta(before, await commandstats(s));
    expect(during).toEqual({ followers: 0, feeds: 0, reporting: 0, followed: 0, timers: 0 });
    for (const name of ['xadd', 'xrange', 'xrevrange', 'publish', 'subscribe', 'hmget']) expect(quiet[name], `${name} in ${JSON.stringify(quiet)}`).toBeUndefined();
    expect(await s.client?.keys('longrun:{wf:*')).toEqual([]);

    // The same run with a follower: the log is written and published.
    const followed = newWorkflow();
    const runId = await detached(s, followed, [{ op: 'checkpoint', text: 'one' }, { op: 'wait', ms: 300 }, ...steps.slice(1)]);
    const stream = await follow(s, followed);
    await running(stream, runId);
    const mid = await commandstats(s);
    await stream.waitFor(hasIdle, 10_000, 'idle');
    const busy = delta(mid, await commandstats(s));
    expect(busy['xadd']).toBeGreaterThan(0);
    expect(busy['publish']).toBeGreaterThan(0);
    expect(s.gateway.follow.stats.reporting).toBe(0);
  });

  it('stops being reported once nobody has followed it for the interest TTL', async () => {
    const s = await followStack();
    const id = newWorkflow();
    await detached(s, id, [{ op: 'checkpoint', text: 'one' }, { op: 'hang' }]);
    const stream = await follow(s, id);
    await running(stream);
    expect(s.gateway.follow.stats).toMatchObject({ followers: 1, feeds: 1, reporting: 1, followed: 1 });
    stream.close();
    await expect.poll(() => s.gateway.follow.stats.followers, { timeout: 2_000 }).toBe(0);
    await expect.poll(() => s.gateway.follow.stats, { timeout: INTEREST_TTL_MS + 5_000, interval: 200 }).toEqual({ followers: 0, feeds: 0, reporting: 0, followed: 0, timers: 0 });
  }, 30_000);
});

describe('a follower never slows a run', () => {
  it('a follower that reads nothing is dropped past LONGRUN_FOLLOW_BUFFER_BYTES; the run and the other follower go on', async () => {
    const s = await followStack({ LONGRUN_FOLLOW_BUFFER_BYTES: String(1024 * 1024) });
    const id = newWorkflow();
    const steps: Step[] = [
      { op: 'checkpoint', text: 'start' },
      { op: 'wait', ms: 300 },
      // 20 MB at 4 MB/s: a reader keeps within five checkpoints of it; one that reads nothing fills its socket's buffers, then its own.
      {
        op: 'repeat',
        times: 100,
        steps: [
          { op: 'checkpoint', text: 'big', bytes: 200_000 },
          { op: 'wait', ms: 50 },
        ],
      },
      { op: 'checkpoint', text: 'done', status: 'FINISHED' },
      { op: 'end' },
    ];
    await detached(s, id, steps);
    const stalled = await follow(s, id, '', {}, false);
    const reading = await follow(s, id);
    await reading.waitFor(hasIdle, 30_000, 'idle');
    expect(reading.events.filter((e) => e.event === 'checkpoint')).toHaveLength(101);
    await s.owner.waitFor(() => s.owner.segmentEnds.some((e) => e.workflow_id === id), 5_000, 'the end');
    const end = s.owner.segmentEnds.find((e) => e.workflow_id === id);
    expect(end?.reason).toBe('finished');
    // The turn took its own time (5.3 s of steps), whatever its followers took.
    expect(end?.segment_duration_s).toBeLessThan(8);
    const metrics = await s.metrics();
    expect(metricValue(metrics, 'longrun_followers_dropped_total', { why: 'slow' })).toBe(1);
    expect(metricValue(metrics, 'longrun_followers_open')).toBe(0);
    void stalled;
  });

  it('caps followers per workflow and per process: 503 CAPACITY_EXHAUSTED with Retry-After past either', async () => {
    const s = await followStack({ LONGRUN_MAX_FOLLOWERS_PER_WORKFLOW: '1', LONGRUN_MAX_FOLLOWERS: '2' });
    const [a, b, c] = [newWorkflow(), newWorkflow(), newWorkflow()];
    for (const id of [a, b, c]) await detached(s, id, [{ op: 'checkpoint', text: 'one' }, { op: 'hang' }]);
    const first = await follow(s, a);
    expect(first.status).toBe(200);
    const again = await follow(s, a);
    expect(again.status).toBe(503);
    expect(again.headers['retry-after']).toBe('5');
    expect(JSON.parse(again.body)).toMatchObject({ error: { code: 'CAPACITY_EXHAUSTED' } });
    expect((await follow(s, b)).status).toBe(200);
    const third = await follow(s, c);
    expect(third.status).toBe(503);
    expect(third.headers['retry-after']).toBe('5');
    const metrics = await s.metrics();
    expect(metricValue(metrics, 'longrun_cap_rejections_total', { cap: 'workflow_followers' })).toBe(1);
    expect(metricValue(metrics, 'longrun_cap_rejections_total', { cap: 'followers' })).toBe(1);
    // A place given back is taken again.
    first.close();
    await expect.poll(async () => (await follow(s, c)).status, { timeout: 3_000 }).toBe(200);
  });
});

describe('the drain, metrics and /runs', () => {
  it('the drain ends every follow stream cleanly once the runs are stopped (their end sent), and refuses new ones', async () => {
    const s = await followStack();
    const id = newWorkflow();
    await detached(s, id, [{ op: 'checkpoint', text: 'one' }, { op: 'hang' }]);
    const stream = await follow(s, id);
    await running(stream);
    const draining = s.gateway.drain();
    await stream.waitFor((events) => events.some((e) => e.event === 'end'), 10_000, 'the end');
    expect(await stream.closed).toBe('ended');
    expect(kinds(stream.events)).toEqual(['run', 'end']);
    expect(stream.events[1]?.json).toMatchObject({ reason: 'drain', resumable: true });
    const refused = await follow(s, id).catch(() => undefined);
    expect(refused === undefined || refused.status === 503).toBe(true);
    await draining;
    const metrics = await s.gateway.metrics.registry.metrics();
    expect(metricValue(metrics, 'longrun_followers_dropped_total', { why: 'drain' })).toBe(1);
  });

  it('metrics: followers open, events sent by kind, dropped by why; /runs: a run’s followers', async () => {
    const s = await followStack();
    const id = newWorkflow();
    await detached(s, id, [{ op: 'checkpoint', text: 'one' }, { op: 'wait', ms: 300 }, { op: 'checkpoint', text: 'two' }, { op: 'hang' }]);
    const one = await follow(s, id);
    const two = await follow(s, id);
    for (const stream of [one, two]) await stream.waitFor((events) => events.some((e) => e.event === 'checkpoint'), 5_000, 'a checkpoint');
    const metrics = await s.metrics();
    expect(metricValue(metrics, 'longrun_followers_open')).toBe(2);
    expect(metricValue(metrics, 'longrun_follow_events_sent_total', { kind: 'run' })).toBe(2);
    expect(metricValue(metrics, 'longrun_follow_events_sent_total', { kind: 'checkpoint' })).toBe(2);
    for (const why of ['slow', 'drain', 'closing']) expect(metricValue(metrics, 'longrun_followers_dropped_total', { why })).toBe(0);
    expect(metricValue(metrics, 'longrun_follow_appends_total', { result: 'ok' })).toBeGreaterThan(0);
    const runs = await runsState(s);
    expect(runs.find((r) => r['workflow_id'] === id)?.['followers']).toBe(2);
  });
});

describe('without Redis (one replica)', () => {
  it('follows, replays and resyncs from the process’s own log', async () => {
    const s = await followStack({ LONGRUN_FOLLOW_BACKLOG_EVENTS: '2', LONGRUN_FOLLOW_IDLE_MS: '400' }, false);
    const id = newWorkflow();
    await detached(s, id, [
      { op: 'checkpoint', text: 'one' },
      { op: 'wait', ms: 300 },
      { op: 'checkpoint', text: 'two' },
      { op: 'checkpoint', text: 'three', status: 'FINISHED' },
      { op: 'end' },
    ]);
    const stream = await follow(s, id);
    await stream.waitFor(hasIdle, 10_000, 'idle');
    expect(kinds(stream.events)).toEqual(['run', 'checkpoint', 'checkpoint', 'end', 'idle']);
    expect(firstGap(stream.events)).toBeUndefined();
    const resumed = await follow(s, id, `?after=${stream.events[0]?.id}`);
    await resumed.waitFor(hasIdle, 5_000, 'idle');
    expect(kinds(resumed.events)).toEqual(['checkpoint', 'end', 'idle']);
    expect(resumed.events[0]?.json['resync']).toBe(true);
  });
});
