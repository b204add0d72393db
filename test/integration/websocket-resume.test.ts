/**
 * Sessions that outlive their connection, on one replica (docs/spec.md §12): a connection
 * lost mid-turn parks its run — the service's stream stays open, the relay is still
 * served, actions for the client are kept in order — and a start of the same actor naming
 * that workflow with no new input re-attaches to it: the client gets every action it was
 * sent and did not answer, then those emitted meanwhile, then the live stream, and the
 * service never sees a second start. What ends a parked run (its window, its backlog, a
 * start with input or of another actor) stops it with WORKHORSE_WEBSOCKET_PING_FAILED.
 * Real gateway, simulators and redis-server; `ws` clients.
 */
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { lockKey } from '../../src/redis/keys';
import { WEBSOCKET_PREAUTH, type PreauthConfig } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import type { CallRecord, WorkflowSimulatorOptions } from '../../sandbox/workflow-sim';
import { metricValue, startStack, type Stack } from '../../stack';
import { kindOf, openSession, resume, runsState, start, type Client } from '../helpers/ws-session';

let stack: Stack | undefined;
const clients: WebSocket[] = [];
const open = (s: { url: string }, options: WebSocket.ClientOptions = {}): Promise<Client> => openSession(s.url, clients, options);

afterEach(async () => {
  for (const ws of clients.splice(0)) ws.terminate();
  await stack?.close();
  stack = undefined;
});

async function resumeStack(
  env: Record<string, string> = {},
  preauth: PreauthConfig = { lockConcurrentFlow: true, actorId: 'user-7' },
  workflow?: WorkflowSimulatorOptions,
): Promise<Stack> {
  stack = await startStack({
    redis: 'own',
    ...(workflow ? { workflow } : {}),
    env: { LONGRUN_WS_PING_MS: '100', LONGRUN_WS_PONG_TIMEOUT_MS: '400', LONGRUN_WS_RESUME_WINDOW_MS: '3000', LONGRUN_STOP_ACK_TIMEOUT_MS: '2000', ...env },
  });
  stack.owner.configure(WEBSOCKET_PREAUTH, preauth);
  return stack;
}

async function callOf(s: Stack, id: string): Promise<CallRecord> {
  await s.workflow.waitFor(() => s.workflow.callsFor(id).length > 0, 10_000, `a call of ${id}`);
  return s.workflow.callsFor(id)[0] as CallRecord;
}

describe('a lost connection parks the run; the client re-attaches', () => {
  it('every unanswered action and every one emitted meanwhile, in order, then the live stream; no second start; the relay served while parked', async () => {
    const s = await resumeStack();
    const id = '6001';
    const first = await open(s);
    first.send(
      start(id, [
        { op: 'checkpoint', text: 'before' },
        { op: 'client', action: { runReadFile: { filepath: 'a.txt' } }, expect: { plainTextResponse: { response: 'A' } } },
        { op: 'checkpoint', text: 'during' },
        { op: 'http', path: '/api/v4/projects/6' },
        { op: 'client', action: { runReadFile: { filepath: 'b.txt' } }, expect: { plainTextResponse: { response: 'B' } } },
        { op: 'checkpoint', text: 'after' },
        { op: 'end' },
      ]),
    );
    const readA = await first.next('runReadFile');
    // The laptop lid: the socket dies without a close frame, runReadFile a.txt unanswered.
    first.ws.terminate();
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
    expect((await runsState(s))[0]?.['parked_at']).toEqual(expect.any(String));

    const second = await open(s);
    second.send(resume(id));
    const replayedA = await second.next('runReadFile');
    expect(replayedA).toEqual(readA);
    second.send({ actionResponse: { requestID: readA['requestID'], plainTextResponse: { response: 'A' } } });
    const readB = await second.next('runReadFile', 2);
    second.send({ actionResponse: { requestID: readB['requestID'], plainTextResponse: { response: 'B' } } });
    expect(await second.closed).toEqual({ code: 1000, reason: '' });

    // The first connection saw `before` and a.txt; the second a.txt again (unanswered), then the rest, in order.
    expect(first.frames.map(kindOf)).toEqual(['newCheckpoint', 'runReadFile']);
    expect(
      second.frames.map((f) => (kindOf(f) === 'newCheckpoint' ? (f['newCheckpoint'] as { checkpoint: string }).checkpoint : (f['runReadFile'] as { filepath: string }).filepath)),
    ).toEqual(['a.txt', 'during', 'b.txt', 'after']);
    const calls = s.workflow.callsFor(id);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ stopReasons: [], protocolErrors: [], ended: { how: 'ok' } });
    expect(s.owner.apiRequests.map((r) => r.path)).toContain('/api/v4/projects/6');
    await expect.poll(() => s.gateway.registry.size, { timeout: 5_000 }).toBe(0);
    expect(await s.client?.exists(lockKey(id))).toBe(0);
    const metrics = await s.metrics();
    expect(metricValue(metrics, 'longrun_websocket_parked_total')).toBe(1);
    expect(metricValue(metrics, 'longrun_websocket_reattached_total', { how: 'local' })).toBe(1);
    expect(metricValue(metrics, 'longrun_websocket_backlog_bytes')).toBe(0);
    expect(metricValue(metrics, 'longrun_teardowns_total', { transport: 'websocket', reason: 'finished' })).toBe(1);
  });

  it('a client that stops answering pings is parked too, and the actor in x-gitlab-global-user-id is enough', async () => {
    // A pong timeout that leaves a loaded machine time to open the run first (the loss must come after checkpoint a, before b).
    const s = await resumeStack({ LONGRUN_WS_PONG_TIMEOUT_MS: '1500' }, { lockConcurrentFlow: true, serviceHeaders: { 'x-gitlab-global-user-id': 'global-9' } });
    const id = '6002';
    const silent = await open(s, { autoPong: false });
    silent.send(start(id, [{ op: 'checkpoint', text: 'a' }, { op: 'wait', ms: 3_000 }, { op: 'checkpoint', text: 'b' }, { op: 'end' }]));
    await silent.next('newCheckpoint');
    expect((await silent.closed).code).toBe(1006);
    const back = await open(s);
    back.send(resume(id));
    expect(await back.closed).toEqual({ code: 1000, reason: '' });
    expect(back.frames.map((f) => (f['newCheckpoint'] as { checkpoint: string }).checkpoint)).toEqual(['b']);
    expect(s.workflow.callsFor(id)).toHaveLength(1);
    expect(s.workflow.callsFor(id)[0]?.stopReasons).toEqual([]);
  });

  it('a connection that goes while the service streams to it: parked without a close frame, stopped with one — never cancelled', async () => {
    // Between the client's FIN (or close frame) and the socket's 'close', ws already reads
    // CLOSING; a frame written then ended the run client_gone (the call cancelled) in
    // about one drop of four. 12 drops of each kind make a miss of that unlikely.
    const s = await resumeStack({ LONGRUN_WS_RESUME_WINDOW_MS: '10000' });
    const streaming: Step[] = [
      {
        op: 'repeat',
        times: 300,
        steps: [
          { op: 'checkpoint', text: 'x' },
          { op: 'wait', ms: 1 },
        ],
      },
      { op: 'hang' },
    ];
    const ids = { lost: [] as string[], closed: [] as string[] };
    for (let i = 0; i < 24; i++) {
      const how = i % 2 === 0 ? 'lost' : 'closed';
      const id = `6020-${i}`;
      ids[how].push(id);
      const client = await open(s);
      client.send(start(id, streaming));
      await client.next('newCheckpoint', 3);
      if (how === 'lost') client.ws.terminate();
      else client.ws.close(1000);
      await client.closed;
    }
    await expect.poll(() => ids.closed.filter((id) => s.workflow.callsFor(id)[0]?.ended === undefined), { timeout: 5_000 }).toEqual([]);
    for (const id of ids.closed) expect(s.workflow.callsFor(id)[0]?.stopReasons, id).toEqual(['WORKHORSE_WEBSOCKET_CLOSE_1000']);
    await expect
      .poll(
        async () =>
          (await runsState(s))
            .filter((r) => r['state'] === 'parked')
            .map((r) => r['workflow_id'])
            .sort(),
        { timeout: 5_000 },
      )
      .toEqual([...ids.lost].sort());
    for (const id of ids.lost) expect(s.workflow.callsFor(id)[0]?.ended, id).toBeUndefined();
    const metrics = await s.metrics();
    expect(metricValue(metrics, 'longrun_teardowns_total', { transport: 'websocket', reason: 'client_gone' })).toBe(0);
    expect(metricValue(metrics, 'longrun_websocket_parked_total')).toBe(ids.lost.length);
    // One re-attaches: what was emitted while it was parked follows.
    const back = await open(s);
    back.send(resume(ids.lost[0] as string));
    await back.next('newCheckpoint');
  });

  it('a client gone at the very end of its turn (the close frame unanswered, cut off 1006) is not parked: its slot is given back', async () => {
    const s = await resumeStack({ LONGRUN_WS_CLOSE_TIMEOUT_MS: '300', LONGRUN_MAX_WS_SESSIONS: '1' });
    const client = await open(s);
    client.send(start('6021', [{ op: 'checkpoint', text: 'a' }, { op: 'wait', ms: 200 }, { op: 'end' }]));
    await client.next('newCheckpoint');
    // The client stops reading: the close frame the turn's end brings goes unanswered.
    (client.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    await s.workflow.waitFor(() => s.workflow.callsFor('6021')[0]?.ended !== undefined, 5_000, 'the turn to end');
    await expect.poll(() => s.gateway.registry.size, { timeout: 5_000 }).toBe(0);
    // Past the close timeout the gateway cut the socket off; then a second session has the one slot.
    await new Promise((resolve) => setTimeout(resolve, 600));
    client.ws.terminate();
    const next = await open(s);
    next.send(start('6022', [{ op: 'checkpoint', text: 'b' }, { op: 'end' }]));
    expect(await next.closed).toEqual({ code: 1000, reason: '' });
    expect(metricValue(await s.metrics(), 'longrun_websocket_parked_total')).toBe(0);
  });

  it('a parked run keeps its LONGRUN_MAX_WS_SESSIONS slot', async () => {
    const s = await resumeStack({ LONGRUN_MAX_WS_SESSIONS: '1' });
    const client = await open(s);
    client.send(start('6010', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await client.next('newCheckpoint');
    client.ws.terminate();
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
    await expect(open(s)).rejects.toThrow(/503/);
  });

  it('a close frame is intentional: not parked, stopped as Workhorse does', async () => {
    const s = await resumeStack();
    const client = await open(s);
    client.send(start('6003', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await client.next('newCheckpoint');
    client.ws.close(1000);
    await client.closed;
    const call = await callOf(s, '6003');
    await s.workflow.waitFor(() => call.ended !== undefined, 5_000, 'ended');
    expect(call.stopReasons).toEqual(['WORKHORSE_WEBSOCKET_CLOSE_1000']);
    expect(metricValue(await s.metrics(), 'longrun_websocket_parked_total')).toBe(0);
  });
});

describe('the edges of a re-attach', () => {
  it('an answer that crosses the replay of its action is passed on once: the client may answer the replay again', async () => {
    const s = await resumeStack();
    const id = '6101';
    const first = await open(s);
    first.send(
      start(id, [
        { op: 'client', action: { runReadFile: { filepath: 'a.txt' } }, expect: { plainTextResponse: { response: 'A' } } },
        { op: 'checkpoint', text: 'after' },
        { op: 'end' },
      ]),
    );
    const readA = await first.next('runReadFile');
    first.ws.terminate();
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
    const second = await open(s);
    // The client finished executing a.txt while away: it resumes and answers at once, before the replay reaches it.
    second.send(resume(id));
    second.send({ actionResponse: { requestID: readA['requestID'], plainTextResponse: { response: 'A' } } });
    expect(await second.next('runReadFile')).toEqual(readA);
    // The replayed a.txt is answered again, as the docs tell a client to treat a replay it cannot tell from a new one.
    second.send({ actionResponse: { requestID: readA['requestID'], plainTextResponse: { response: 'A' } } });
    expect(await second.closed).toEqual({ code: 1000, reason: '' });
    const call = s.workflow.callsFor(id)[0];
    expect(call).toMatchObject({ protocolErrors: [], ended: { how: 'ok' } });
    expect(s.workflow.callsFor(id)).toHaveLength(1);
  });

  it('a connection lost while its run is still being opened parks it: the resume re-attaches, one start', async () => {
    // The service's stream takes a while to open (300 ms each way through the front).
    const s = await resumeStack({}, undefined, { front: { latencyMs: 300 } });
    const id = '6102';
    const first = await open(s);
    first.send(start(id, [{ op: 'client', action: { runReadFile: { filepath: 'a.txt' } } }, { op: 'hang' }]));
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBeDefined();
    expect(first.frames).toEqual([]);
    first.ws.terminate();
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
    const second = await open(s);
    second.send(resume(id));
    expect(kindOf(await second.next('runReadFile'))).toBe('runReadFile');
    expect(s.workflow.callsFor(id)).toHaveLength(1);
    expect(s.workflow.callsFor(id)[0]?.stopReasons).toEqual([]);
  });

  it('a run that lost its lock closes its session 1012, so the client reconnects and resumes', async () => {
    const s = await resumeStack({ LONGRUN_LEASE_TTL_MS: '600' });
    const id = '6103';
    const client = await open(s);
    client.send(start(id, [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await client.next('newCheckpoint');
    // Redis lost the lock (a restart without persistence, a failover): the next renewal finds it gone.
    await s.client?.del(lockKey(id));
    expect(await client.closed).toEqual({ code: 1012, reason: 'the run lost its lock: reconnect to resume' });
    expect(s.workflow.callsFor(id)[0]?.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
  });

  it('Redis restarted empty: every lease is renewed as soon as it is back and takes its lost lock back under the store fence; the session goes on; another start is refused 1013, never run beside it', async () => {
    // Renewals every 20 s: without the renewal on reconnect the lock would stay missing that long.
    const s = await resumeStack({ LONGRUN_LEASE_TTL_MS: '60000' });
    const id = '6104';
    const client = await open(s);
    client.send(start(id, [{ op: 'checkpoint', text: 'a' }, { op: 'wait', ms: 1_500 }, { op: 'checkpoint', text: 'b', status: 'FINISHED' }, { op: 'end' }]));
    await client.next('newCheckpoint');
    await s.redis?.restart();
    const backAt = Date.now();
    await expect.poll(async () => metricValue(await s.metrics(), 'longrun_lock_operations_total', { op: 'renew', result: 'reasserted' }), { timeout: 10_000 }).toBe(1);
    expect(Date.now() - backAt).toBeLessThan(10_000);
    expect(await s.client?.hget(`workhorse:duoworkflow:run:${id}`, 'run_id')).toBeTruthy();
    // Another session for the workflow: refused, the store fenced or the lock held again.
    const other = await open(s);
    other.send(start(id, [{ op: 'end' }]));
    expect((await other.closed).code).toBe(1013);
    // The first goes on to its end, one call all along.
    expect(await client.closed).toEqual({ code: 1000, reason: '' });
    expect(s.workflow.callsFor(id)).toHaveLength(1);
    expect(s.workflow.callsFor(id)[0]).toMatchObject({ stopReasons: [], ended: { how: 'ok' } });
  });
});

describe('what ends a parked run: WORKHORSE_WEBSOCKET_PING_FAILED, the workflow resumable', () => {
  it('its window ends without a re-attach: stopped, the lock released', async () => {
    const s = await resumeStack({ LONGRUN_WS_RESUME_WINDOW_MS: '500' });
    const client = await open(s);
    client.send(start('6004', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await client.next('newCheckpoint');
    client.ws.terminate();
    const call = await callOf(s, '6004');
    await s.workflow.waitFor(() => call.ended !== undefined, 5_000, 'ended');
    // On the public service's allowlist: acknowledged OK, the workflow stays resumable.
    expect(call).toMatchObject({ stopReasons: ['WORKHORSE_WEBSOCKET_PING_FAILED'], ended: { how: 'ok' } });
    expect(s.workflow.stoppedWorkflows.has('6004')).toBe(false);
    await expect.poll(() => s.gateway.registry.size, { timeout: 5_000 }).toBe(0);
    expect(await s.client?.exists(lockKey('6004'))).toBe(0);
    expect(metricValue(await s.metrics(), 'longrun_websocket_park_ends_total', { why: 'expired' })).toBe(1);
  });

  it('its backlog overflows LONGRUN_WS_BACKLOG_BYTES: stopped', async () => {
    const s = await resumeStack({ LONGRUN_WS_BACKLOG_BYTES: '100000' });
    const client = await open(s);
    client.send(
      start('6005', [{ op: 'checkpoint', text: 'a' }, { op: 'wait', ms: 300 }, { op: 'repeat', times: 20, steps: [{ op: 'checkpoint', bytes: 20_000 }] }, { op: 'hang' }]),
    );
    await client.next('newCheckpoint');
    client.ws.terminate();
    const call = await callOf(s, '6005');
    await s.workflow.waitFor(() => call.ended !== undefined, 5_000, 'ended');
    expect(call.stopReasons).toEqual(['WORKHORSE_WEBSOCKET_PING_FAILED']);
    await expect.poll(() => s.gateway.registry.size, { timeout: 5_000 }).toBe(0);
    const metrics = await s.metrics();
    expect(metricValue(metrics, 'longrun_websocket_park_ends_total', { why: 'backlog_full' })).toBe(1);
    expect(metricValue(metrics, 'longrun_websocket_backlog_bytes')).toBe(0);
  });

  it("the process's parked backlogs outgrow LONGRUN_WS_BACKLOG_BUDGET_BYTES: the parked run that grows past it is stopped, the others kept", async () => {
    const s = await resumeStack({ LONGRUN_WS_BACKLOG_BYTES: '1000000', LONGRUN_WS_BACKLOG_BUDGET_BYTES: '150000' });
    // Each run parks, then is sent five checkpoints of 20 000 bytes: about 100 kB of backlog.
    const steps: Step[] = [{ op: 'checkpoint', text: 'a' }, { op: 'wait', ms: 300 }, { op: 'repeat', times: 5, steps: [{ op: 'checkpoint', bytes: 20_000 }] }, { op: 'hang' }];
    const first = await open(s);
    first.send(start('6010', steps));
    await first.next('newCheckpoint');
    first.ws.terminate();
    await expect.poll(async () => metricValue(await s.metrics(), 'longrun_websocket_backlog_bytes'), { timeout: 5_000 }).toBeGreaterThan(100_000);
    // The second run's backlog takes the process past 150 000 bytes: it is stopped; the first stays parked.
    const second = await open(s);
    second.send(start('6011', steps));
    await second.next('newCheckpoint');
    second.ws.terminate();
    const call = await callOf(s, '6011');
    await s.workflow.waitFor(() => call.ended !== undefined, 5_000, 'ended');
    expect(call.stopReasons).toEqual(['WORKHORSE_WEBSOCKET_PING_FAILED']);
    expect(s.workflow.stoppedWorkflows.has('6011')).toBe(false);
    const metrics = await s.metrics();
    expect(metricValue(metrics, 'longrun_websocket_park_ends_total', { why: 'backlog_budget' })).toBe(1);
    expect(metricValue(metrics, 'longrun_websocket_park_ends_total', { why: 'backlog_full' })).toBe(0);
    await expect.poll(async () => (await runsState(s)).map((r) => [r['workflow_id'], r['state']]), { timeout: 5_000 }).toEqual([['6010', 'parked']]);
    // The first run's backlog is whole: its client re-attaches and gets every checkpoint.
    const back = await open(s);
    back.send(resume('6010'));
    expect((await back.next('newCheckpoint', 5))['newCheckpoint']).toMatchObject({ checkpoint: expect.any(String) });
    expect(metricValue(await s.metrics(), 'longrun_websocket_backlog_bytes')).toBe(0);
  });

  it('a start with input, or of another actor, is a new turn: the parked run is stopped and the start goes to the service', async () => {
    const s = await resumeStack();
    for (const [id, how] of [
      ['6006', 'input'],
      ['6007', 'actor'],
    ] as const) {
      const client = await open(s);
      client.send(start(id, [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
      await client.next('newCheckpoint');
      client.ws.terminate();
      await expect.poll(async () => (await runsState(s)).find((r) => r['workflow_id'] === id)?.['state'], { timeout: 5_000 }).toBe('parked');
      if (how === 'actor') s.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'someone-else' });
      const next = await open(s);
      next.send(start(id, [{ op: 'checkpoint', text: 'new turn' }, { op: 'end' }]));
      expect(await next.closed, id).toEqual({ code: 1000, reason: '' });
      const calls = s.workflow.callsFor(id);
      expect(calls, id).toHaveLength(2);
      expect(calls[0]?.stopReasons, id).toEqual(['WORKHORSE_WEBSOCKET_PING_FAILED']);
      expect(calls[1]?.startRequest.goal, id).toBe('the goal');
      expect(next.frames.map((f) => (f['newCheckpoint'] as { checkpoint: string }).checkpoint)).toEqual(['new turn']);
    }
    expect(metricValue(await s.metrics(), 'longrun_websocket_park_ends_total', { why: 'taken_over' })).toBe(2);
  });

  it('without an actor on the preauth there is no re-attach: a resume start stops the parked run and starts anew', async () => {
    const s = await resumeStack({}, { lockConcurrentFlow: true });
    const client = await open(s);
    client.send(start('6008', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await client.next('newCheckpoint');
    client.ws.terminate();
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
    const next = await open(s);
    next.send(resume('6008'));
    await s.workflow.waitFor(() => s.workflow.callsFor('6008').length === 2, 5_000, 'a new call');
    expect(s.workflow.callsFor('6008')[0]?.stopReasons).toEqual(['WORKHORSE_WEBSOCKET_PING_FAILED']);
    expect(metricValue(await s.metrics(), 'longrun_websocket_reattached_total', { how: 'local' })).toBe(0);
  });

  it('two connections racing for one parked run: exactly one re-attaches, the other is 1013', async () => {
    const s = await resumeStack();
    const client = await open(s);
    client.send(start('6009', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await client.next('newCheckpoint');
    client.ws.terminate();
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
    const [one, two] = await Promise.all([open(s), open(s)]);
    one.send(resume('6009'));
    two.send(resume('6009'));
    const loser = await Promise.race([one.closed.then(() => one), two.closed.then(() => two)]);
    expect(await loser.closed).toEqual({ code: 1013, reason: 'Failed to acquire lock on workflow' });
    const winner = loser === one ? two : one;
    expect(winner.ws.readyState).toBe(WebSocket.OPEN);
    expect(s.workflow.callsFor('6009')).toHaveLength(1);
    expect((await runsState(s))[0]?.['state']).toBe('running');
  });
});
