/**
 * longrun/client's LongrunSession against a real gateway (docs/spec.md §11, §12), the
 * simulators and a real redis-server, the owner's WebSocket preauth naming an actor: a
 * turn through the session client, a socket killed mid-turn that the client reconnects
 * and re-attaches by itself (the unanswered action comes again, the service sees one call
 * and one start), final closes not retried, and a gateway gone for good given up on; then,
 * against a scripted `ws` server, the closes a real gateway does not send on cue (1012,
 * 1001, 1013 after a reconnect), the idle timeout and the resume window.
 */
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { LongrunSession, type LongrunSessionOptions, type SessionAction, type SessionClose, type SessionEvent } from '@longrun/client';
import { WEBSOCKET_PREAUTH } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { startStack, type Stack } from '../../stack';

let stack: Stack | undefined;
const sessions: LongrunSession[] = [];
const servers: WebSocketServer[] = [];

afterEach(async () => {
  for (const session of sessions.splice(0)) session.close();
  await stack?.close();
  stack = undefined;
  for (const server of servers.splice(0)) {
    for (const ws of server.clients) ws.terminate();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

async function sessionStack(): Promise<Stack> {
  stack = await startStack({
    redis: 'own',
    env: {
      LONGRUN_WS_PING_MS: '100',
      LONGRUN_WS_PONG_TIMEOUT_MS: '400',
      LONGRUN_WS_CLOSE_TIMEOUT_MS: '500',
      LONGRUN_WS_RESUME_WINDOW_MS: '3000',
      LONGRUN_STOP_ACK_TIMEOUT_MS: '2000',
    },
  });
  stack.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-7' });
  return stack;
}

interface Harness {
  session: LongrunSession;
  actions: SessionAction[];
  checkpoints: string[];
  events: SessionEvent[];
  closed: Promise<SessionClose>;
}

function harness(s: Stack, onAction: (action: SessionAction, session: LongrunSession) => void, options: Partial<LongrunSessionOptions> = {}): Harness {
  const actions: SessionAction[] = [];
  const checkpoints: string[] = [];
  const events: SessionEvent[] = [];
  let resolveClosed: (close: SessionClose) => void = () => undefined;
  const closed = new Promise<SessionClose>((resolve) => (resolveClosed = resolve));
  const session = new LongrunSession({
    url: `${s.url.replace('http', 'ws')}/api/v4/ai/duo_workflows/ws`,
    query: { client_type: 'node_session_test' },
    reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
    idleTimeoutMs: 2_000,
    onAction: (action, sess) => {
      actions.push(action);
      onAction(action, sess);
    },
    onCheckpoint: (checkpoint) => checkpoints.push(checkpoint.checkpoint),
    onEvent: (event) => events.push(event),
    onClose: (close) => resolveClosed(close),
    ...options,
  });
  sessions.push(session);
  return { session, actions, checkpoints, events, closed };
}

const startOf = (workflowID: string, steps: Step[]) => ({ workflowID, goal: 'the goal', workflowMetadata: scenarioMetadata(steps) });

const readFileAnswer = (action: SessionAction, session: LongrunSession): void => {
  const { filepath } = action['runReadFile'] as { filepath: string };
  session.answer(action.requestID as string, { plainTextResponse: { response: filepath.toUpperCase() } });
};

describe('LongrunSession', () => {
  it('a turn with client actions: answered through onAction, checkpoints through onCheckpoint, onClose 1000', async () => {
    const s = await sessionStack();
    const h = harness(s, readFileAnswer);
    await h.session.start(
      startOf('7001', [
        { op: 'checkpoint', text: 'one' },
        { op: 'client', action: { runReadFile: { filepath: 'a.txt' } }, expect: { plainTextResponse: { response: 'A.TXT' } } },
        { op: 'client', action: { runReadFile: { filepath: 'b.txt' } }, expect: { plainTextResponse: { response: 'B.TXT' } } },
        { op: 'checkpoint', text: 'two' },
        { op: 'end' },
      ]),
    );
    expect(await h.closed).toEqual({ code: 1000, reason: '', how: 'closed', attempts: 0 });
    expect(h.actions.map((a) => (a['runReadFile'] as { filepath: string }).filepath)).toEqual(['a.txt', 'b.txt']);
    expect(h.checkpoints).toEqual(['one', 'two']);
    expect(h.events.filter((e) => e.kind !== 'open')).toEqual([]);
    const calls = s.workflow.callsFor('7001');
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ stopReasons: [], protocolErrors: [], ended: { how: 'ok' } });
    expect(calls[0]?.startRequest).toMatchObject({ workflowID: '7001', goal: 'the goal' });
    expect(h.session.socket).toBeUndefined();
  });

  it('the socket killed mid-turn with an action unanswered: the client reconnects by itself, the action comes again, the turn completes; one call, one start, no stop', async () => {
    const s = await sessionStack();
    let killed = false;
    const h = harness(s, (action, session) => {
      if (!killed) {
        // The laptop lid: the connection dies without a close frame, runReadFile unanswered.
        killed = true;
        session.socket?.terminate();
        return;
      }
      readFileAnswer(action, session);
    });
    await h.session.start(
      startOf('7002', [
        { op: 'checkpoint', text: 'before' },
        { op: 'client', action: { runReadFile: { filepath: 'a.txt' } }, expect: { plainTextResponse: { response: 'A.TXT' } } },
        { op: 'http', path: '/api/v4/projects/6' },
        { op: 'checkpoint', text: 'after' },
        { op: 'end' },
      ]),
    );
    expect(await h.closed).toEqual({ code: 1000, reason: '', how: 'closed', attempts: 0 });
    // The same action twice (replayed, same requestID), every checkpoint once.
    expect(h.actions).toHaveLength(2);
    expect(h.actions[1]).toEqual(h.actions[0]);
    expect(h.checkpoints).toEqual(['before', 'after']);
    expect(h.events.map((e) => e.kind)).toEqual(['open', 'lost', 'reconnecting', 'open']);
    expect(h.events[1]).toMatchObject({ kind: 'lost', code: 1006 });
    expect(h.events[3]).toEqual({ kind: 'open', attempt: 1, resume: true });
    const calls = s.workflow.callsFor('7002');
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ stopReasons: [], protocolErrors: [], ended: { how: 'ok' } });
    expect(calls[0]?.startRequest.goal).toBe('the goal');
    // The client's answer reached the service once (the other answer is the gateway's own, to the http step).
    expect(calls[0]?.actionResponses.filter((r) => r.response.plainTextResponse !== undefined).map((r) => r.response.plainTextResponse?.response)).toEqual(['A.TXT']);
    expect(s.owner.apiRequests.filter((r) => r.path === '/api/v4/projects/6')).toHaveLength(1);
  });

  it('the resume start carries no new input: the same workflowID and the rest, an empty goal, no approval', () => {
    const first = { workflowID: '7', goal: 'do it', workflowMetadata: '{"a":1}', clientCapabilities: ['shell_command'], approval: { approval: {} } };
    expect(LongrunSession.resumeStartOf(first)).toEqual({ workflowID: '7', goal: '', workflowMetadata: '{"a":1}', clientCapabilities: ['shell_command'] });
    expect(first.goal).toBe('do it');
  });

  it('final closes are not retried: 1013 when another session holds the lock, 4400 for a start the gateway refuses', async () => {
    const s = await sessionStack();
    const holder = harness(s, () => undefined);
    await holder.session.start(startOf('7003', [{ op: 'checkpoint', text: 'held' }, { op: 'hang' }]));
    await expect.poll(() => holder.checkpoints).toEqual(['held']);

    const second = harness(s, () => undefined);
    await second.session.start(startOf('7003', [{ op: 'end' }]));
    expect(await second.closed).toEqual({ code: 1013, reason: 'Failed to acquire lock on workflow', how: 'closed', attempts: 0 });
    expect(second.events.map((e) => e.kind)).toEqual(['open']);

    const invalid = harness(s, () => undefined);
    await invalid.session.start({ workflowID: '', goal: 'x' });
    expect(await invalid.closed).toMatchObject({ code: 4400, how: 'closed', attempts: 0 });
    expect(invalid.events.map((e) => e.kind)).toEqual(['open']);
    expect(s.workflow.callsFor('7003')).toHaveLength(1);

    // close() ends the holder with 1000: no reconnect, the run stopped as Workhorse does.
    holder.session.close();
    expect(await holder.closed).toMatchObject({ code: 1000, how: 'closed' });
    expect(holder.events.map((e) => e.kind)).toEqual(['open']);
    const call = s.workflow.callsFor('7003')[0];
    await s.workflow.waitFor(() => call?.ended !== undefined, 5_000, 'ended');
    expect(call?.stopReasons).toEqual(['WORKHORSE_WEBSOCKET_CLOSE_1000']);
  });

  it('the gateway gone for good: reconnecting gives up after maxAttempts and says so', async () => {
    const s = await sessionStack();
    const h = harness(s, () => undefined, { reconnect: { initialDelayMs: 20, maxDelayMs: 100, maxAttempts: 3 } });
    await h.session.start(startOf('7004', [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }]));
    await expect.poll(() => h.checkpoints).toEqual(['a']);
    await s.close();
    stack = undefined;
    const close = await h.closed;
    expect(close).toMatchObject({ how: 'gave_up', attempts: 3, code: 1006 });
    expect(close.error?.message).toMatch(/ECONNREFUSED|Unexpected server response/);
    expect(h.events.filter((e) => e.kind === 'reconnecting').map((e) => (e as { attempt: number }).attempt)).toEqual([1, 2, 3]);
    expect(h.session.closed).toBe(true);
    expect(h.session.socket).toBeUndefined();
  }, 30_000);

  it('the first connection refused is not retried: start() rejects', async () => {
    const s = await sessionStack();
    s.owner.configure(WEBSOCKET_PREAUTH, { deny: { status: 403, body: '{"message":"403 Forbidden"}', contentType: 'application/json' } });
    const h = harness(s, () => undefined);
    await expect(h.session.start(startOf('7005', [{ op: 'end' }]))).rejects.toThrow(/HTTP 403/);
    expect(h.session.closed).toBe(true);
  });
});

/**
 * A scripted stand-in for the gateway (the close codes a real one does not send on cue):
 * each connection's first frame is recorded and `script[n]` plays the n-th connection.
 */
async function scripted(script: Array<(ws: WebSocket) => void>): Promise<{ url: string; starts: Array<Record<string, unknown>> }> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  servers.push(server);
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const starts: Array<Record<string, unknown>> = [];
  server.on('connection', (ws) => {
    ws.once('message', (data: Buffer) => {
      starts.push((JSON.parse(data.toString('utf8')) as { startRequest: Record<string, unknown> }).startRequest);
      script[starts.length - 1]?.(ws);
    });
  });
  return { url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/api/v4/ai/duo_workflows/ws`, starts };
}

function scriptedSession(url: LongrunSessionOptions['url'], options: Partial<LongrunSessionOptions> = {}): Omit<Harness, 'checkpoints'> {
  const actions: SessionAction[] = [];
  const events: SessionEvent[] = [];
  let resolveClosed: (close: SessionClose) => void = () => undefined;
  const closed = new Promise<SessionClose>((resolve) => (resolveClosed = resolve));
  const session = new LongrunSession({
    url,
    reconnect: { initialDelayMs: 10, maxDelayMs: 50 },
    onAction: (action) => actions.push(action),
    onEvent: (event) => events.push(event),
    onClose: (close) => resolveClosed(close),
    ...options,
  });
  sessions.push(session);
  return { session, actions, events, closed };
}

const firstStart = { workflowID: '9', goal: 'go', workflowMetadata: '{"m":1}', clientCapabilities: ['shell_command'], approval: { approval: {} } };
const resumeStart = { workflowID: '9', goal: '', workflowMetadata: '{"m":1}', clientCapabilities: ['shell_command'] };
const action = (requestID: string) => JSON.stringify({ requestID, runReadFile: { filepath: 'x' }, newCheckpoint: null });

describe('LongrunSession: which closes it reconnects on', () => {
  it('1012 and 1001 reconnect with the resume start; the replayed action is handed over again; 1000 ends it', async () => {
    const { url, starts } = await scripted([
      (ws) => {
        ws.send(action('r1'), { binary: true });
        ws.close(1012, 'service restart');
      },
      (ws) => {
        ws.send(action('r1'), { binary: true });
        ws.close(1001, 'server shutdown');
      },
      (ws) => ws.close(1000),
    ]);
    const h = scriptedSession(url);
    await h.session.start(firstStart);
    // One attempt since the last loss (the 1001): the third connection closed before it proved good.
    expect(await h.closed).toEqual({ code: 1000, reason: '', how: 'closed', attempts: 1 });
    expect(starts).toEqual([firstStart, resumeStart, resumeStart]);
    expect(h.actions).toEqual([
      { requestID: 'r1', runReadFile: { filepath: 'x' } },
      { requestID: 'r1', runReadFile: { filepath: 'x' } },
    ]);
    expect(h.events.filter((e) => e.kind === 'lost')).toMatchObject([
      { code: 1012, reason: 'service restart' },
      { code: 1001, reason: 'server shutdown' },
    ]);
  });

  it('1013 just after a reconnect (the gateway has not noticed the old connection gone) is retried; 1008 is final', async () => {
    const { url, starts } = await scripted([(ws) => ws.terminate(), (ws) => ws.close(1013, 'Failed to acquire lock on workflow'), (ws) => ws.close(1008, 'no')]);
    const h = scriptedSession(url);
    await h.session.start(firstStart);
    expect(await h.closed).toEqual({ code: 1008, reason: 'no', how: 'closed', attempts: 2 });
    expect(starts).toEqual([firstStart, resumeStart, resumeStart]);
  });

  it('a first start the store fence refuses (1013 "… retry in N s") is sent again, the same start, once N s have passed', async () => {
    const fence = 'the workflow lock store is new (no longrun marker): fenced until it is 60 s old, retry in 1 s';
    const { url, starts } = await scripted([(ws) => ws.close(1013, fence), (ws) => ws.close(1000)]);
    const h = scriptedSession(url);
    const startedAt = Date.now();
    await h.session.start(firstStart);
    expect(await h.closed).toEqual({ code: 1000, reason: '', how: 'closed', attempts: 0 });
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1_000);
    expect(starts).toEqual([firstStart, firstStart]);
    expect(h.events.filter((e) => e.kind === 'fenced')).toEqual([{ kind: 'fenced', fence: 'new', delayMs: expect.any(Number) }]);
  });

  it('a resume start the store fence refuses is retried with the reconnect backoff, not after the fence: its run may be parked elsewhere', async () => {
    const fence = 'the workflow lock store lost its data (a restart, a failover or a flush): fenced, retry in 30 s';
    const { url, starts } = await scripted([(ws) => ws.terminate(), (ws) => ws.close(1013, fence), (ws) => ws.close(1000)]);
    const h = scriptedSession(url);
    await h.session.start(firstStart);
    expect(await h.closed).toEqual({ code: 1000, reason: '', how: 'closed', attempts: 2 });
    expect(starts).toEqual([firstStart, resumeStart, resumeStart]);
    expect(h.events.filter((e) => e.kind === 'fenced')).toEqual([]);
  });

  it('a connection that hears nothing (no frame, no ping) for idleTimeoutMs counts as lost', async () => {
    const { url, starts } = await scripted([() => undefined, (ws) => ws.close(1000)]);
    const h = scriptedSession(url, { idleTimeoutMs: 200 });
    await h.session.start(firstStart);
    expect((await h.closed).code).toBe(1000);
    expect(starts).toEqual([firstStart, resumeStart]);
    expect(h.events.find((e) => e.kind === 'lost')).toMatchObject({ code: 1006 });
  });

  it('a url function is asked once per connection attempt: the reconnect goes where it says', async () => {
    const one = await scripted([(ws) => ws.terminate()]);
    const two = await scripted([(ws) => ws.close(1013, 'Failed to acquire lock on workflow'), (ws) => ws.close(1000)]);
    const urls = [one.url, two.url, two.url];
    let asked = 0;
    const h = scriptedSession('', { url: () => urls[asked++] as string });
    await h.session.start(firstStart);
    expect((await h.closed).code).toBe(1000);
    expect(asked).toBe(3);
    expect(one.starts).toEqual([firstStart]);
    expect(two.starts).toEqual([resumeStart, resumeStart]);
  });

  it('gives up once the resume window has passed since the loss', async () => {
    const { url } = await scripted(Array.from({ length: 50 }, () => (ws: WebSocket) => ws.terminate()));
    const h = scriptedSession(url, { reconnect: { initialDelayMs: 40, maxDelayMs: 40, jitter: 'none', maxAttempts: 1000, windowMs: 300 } });
    await h.session.start(firstStart);
    const close = await h.closed;
    expect(close).toMatchObject({ how: 'gave_up', code: 1006 });
    expect(close.attempts).toBeGreaterThan(2);
    expect(close.attempts).toBeLessThan(12);
  });
});
