/**
 * Sessions that re-attach on another replica (docs/spec.md §12 "Any replica"): the replica
 * a reconnect lands on reads the run record, asks the holder for its parked run and
 * bridges the socket to it through Redis — the replayed actions in order, the answers
 * back, no second start — and what ends or refuses such a bridge: a socket-only drain
 * (1012, the run parked again), a holder that stops answering (1012), a start with input
 * or of another actor (the parked run stopped, the start sent), two racing connections,
 * Redis unable to say where the run is (1012). Two real gateways on one redis-server.
 */
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { inboxKey } from '../../src/redis/keys';
import { lockKey } from '../../src/redis/keys';
import { WEBSOCKET_PREAUTH, type PreauthConfig } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import { resume as resumeRedis } from '../../stack/redis-server';
import { metricValue, startStack, type Replica, type Stack } from '../../stack';
import { kindOf, openSession, resume, runsState, start, type Client } from '../helpers/ws-session';

let stack: Stack | undefined;
const clients: WebSocket[] = [];
const open = (s: { url: string }): Promise<Client> => openSession(s.url, clients);

afterEach(async () => {
  for (const ws of clients.splice(0)) ws.terminate();
  await stack?.close();
  stack = undefined;
});

const ENV = {
  LONGRUN_WS_PING_MS: '100',
  LONGRUN_WS_PONG_TIMEOUT_MS: '1000',
  LONGRUN_WS_RESUME_WINDOW_MS: '5000',
  LONGRUN_STOP_ACK_TIMEOUT_MS: '2000',
  LONGRUN_DRAIN_TIMEOUT_MS: '3000',
  LONGRUN_SHUTDOWN_DELAY_MS: '0',
};

/** The holder (replica-a, the stack's gateway) and another replica (replica-b) on the same services and Redis. */
async function twoReplicas(preauth: PreauthConfig = { lockConcurrentFlow: true, actorId: 'user-7' }): Promise<{ s: Stack; b: Replica }> {
  stack = await startStack({ redis: 'own', env: { ...ENV, LONGRUN_REPLICA_ID: 'replica-a' } });
  stack.owner.configure(WEBSOCKET_PREAUTH, preauth);
  const b = await stack.startReplica({ env: { LONGRUN_REPLICA_ID: 'replica-b' } });
  return { s: stack, b };
}

const twoReads: Step[] = [
  { op: 'checkpoint', text: 'before' },
  { op: 'client', action: { runReadFile: { filepath: 'a.txt' } }, expect: { plainTextResponse: { response: 'A' } } },
  { op: 'checkpoint', text: 'during' },
  { op: 'client', action: { runReadFile: { filepath: 'b.txt' } }, expect: { plainTextResponse: { response: 'B' } } },
  { op: 'checkpoint', text: 'after' },
  { op: 'end' },
];

/** Opens a session on `s`, starts `id` with `steps`, waits for the first runReadFile, and drops the socket (no close frame): the run parks. */
async function parkOn(s: Stack, id: string, steps: Step[]): Promise<Record<string, unknown>> {
  const first = await open(s);
  first.send(start(id, steps));
  const read = await first.next('runReadFile');
  first.ws.terminate();
  await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
  return read;
}

const summary = (f: Record<string, unknown>): string =>
  kindOf(f) === 'newCheckpoint' ? (f['newCheckpoint'] as { checkpoint: string }).checkpoint : String((f['runReadFile'] as { filepath: string }).filepath);

describe('a reconnect on another replica is bridged to the run parked on its holder', () => {
  it('replays the unanswered action, passes the answers back, relays the rest in order; one start; nothing left in Redis', async () => {
    const { s, b } = await twoReplicas();
    const id = '7001';
    const readA = await parkOn(s, id, twoReads);
    expect(await s.client?.hget(`workhorse:duoworkflow:run:${id}`, 'state')).toBe('parked');
    expect(await s.client?.hget(`workhorse:duoworkflow:run:${id}`, 'replica')).toBe('replica-a');

    const second = await open(b);
    second.send(resume(id));
    expect(await second.next('runReadFile')).toEqual(readA);
    second.send({ actionResponse: { requestID: readA['requestID'], plainTextResponse: { response: 'A' } } });
    const readB = await second.next('runReadFile', 2);
    second.send({ actionResponse: { requestID: readB['requestID'], plainTextResponse: { response: 'B' } } });
    expect(await second.closed).toEqual({ code: 1000, reason: '' });
    expect(second.frames.map(summary)).toEqual(['a.txt', 'during', 'b.txt', 'after']);

    const calls = s.workflow.callsFor(id);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ stopReasons: [], protocolErrors: [], ended: { how: 'ok' } });
    await expect.poll(() => s.gateway.registry.size, { timeout: 5_000 }).toBe(0);
    expect(b.gateway.registry.size).toBe(0);
    const holder = await s.metrics();
    expect(metricValue(holder, 'longrun_websocket_reattached_total', { how: 'bridged' })).toBe(1);
    expect(metricValue(holder, 'longrun_websocket_reattached_total', { how: 'local' })).toBe(0);
    await expect.poll(async () => metricValue(await s.metrics(), 'longrun_bridges_open', { side: 'holder' }), { timeout: 5_000 }).toBe(0);
    await expect.poll(async () => metricValue(await b.metrics(), 'longrun_bridges_open', { side: 'socket' }), { timeout: 5_000 }).toBe(0);
    expect(metricValue(await b.metrics(), 'longrun_bridge_messages_total', { kind: 'claim' })).toBe(1);
    // The lock, the run record and both inboxes are gone: the store marker (store-fence.lua) is all that stays.
    await expect.poll(async () => (await s.client?.keys('*'))?.sort(), { timeout: 5_000 }).toEqual(['longrun:store']);
    expect(await s.client?.exists(lockKey(id), inboxKey('replica-a'), inboxKey('replica-b'))).toBe(0);
  });

  it('a drain of the replica holding only the socket closes it 1012 and parks the run again: the client re-attaches on the holder, no resume', async () => {
    const { s, b } = await twoReplicas();
    const id = '7002';
    const readA = await parkOn(s, id, twoReads);
    const second = await open(b);
    second.send(resume(id));
    await second.next('runReadFile');
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('running');
    void b.gateway.drain();
    expect(await second.closed).toEqual({ code: 1012, reason: 'service restart' });
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');

    const third = await open(s);
    third.send(resume(id));
    expect(await third.next('runReadFile')).toEqual(readA);
    third.send({ actionResponse: { requestID: readA['requestID'], plainTextResponse: { response: 'A' } } });
    const readB = await third.next('runReadFile', 2);
    third.send({ actionResponse: { requestID: readB['requestID'], plainTextResponse: { response: 'B' } } });
    expect(await third.closed).toEqual({ code: 1000, reason: '' });
    expect(s.workflow.callsFor(id)).toHaveLength(1);
    expect(s.workflow.callsFor(id)[0]).toMatchObject({ stopReasons: [], ended: { how: 'ok' } });
  });

  it('an answer the client sends as the socket-only replica drains still reaches the run: the reconnect is not sent that action again', async () => {
    const { s, b } = await twoReplicas();
    const id = '7020';
    const readA = await parkOn(s, id, twoReads);
    const second = await open(b);
    second.send(resume(id));
    await second.next('runReadFile');
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('running');
    // The drain's close frame and the client's answer cross on the wire.
    const draining = b.gateway.drain();
    second.send({ actionResponse: { requestID: readA['requestID'], plainTextResponse: { response: 'A' } } });
    expect(await second.closed).toEqual({ code: 1012, reason: 'service restart' });
    await s.workflow.waitFor(() => s.workflow.callsFor(id)[0]?.actionResponses.length === 1, 5_000, 'the answer sent during the drain');
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
    await draining;

    const third = await open(s);
    third.send(resume(id));
    const readB = await third.next('runReadFile');
    // Answered already: not replayed, so a client that executes what it is sent runs a.txt once.
    expect((readB['runReadFile'] as { filepath: string }).filepath).toBe('b.txt');
    third.send({ actionResponse: { requestID: readB['requestID'], plainTextResponse: { response: 'B' } } });
    expect(await third.closed).toEqual({ code: 1000, reason: '' });
    expect(third.frames.filter((f) => f['runReadFile']).map((f) => (f['runReadFile'] as { filepath: string }).filepath)).toEqual(['b.txt']);
    expect(s.workflow.callsFor(id)).toHaveLength(1);
    expect(s.workflow.callsFor(id)[0]).toMatchObject({ stopReasons: [], protocolErrors: [], ended: { how: 'ok' } });
    expect(s.workflow.callsFor(id)[0]?.actionResponses.map((r) => r.requestID)).toEqual([readA['requestID'], readB['requestID']]);
  });

  it('a client lost on the bridging replica parks the run again on its holder', async () => {
    const { s, b } = await twoReplicas();
    const id = '7003';
    await parkOn(s, id, twoReads);
    const second = await open(b);
    second.send(resume(id));
    await second.next('runReadFile');
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('running');
    // The holder's /runs names the replica holding the socket while the bridge serves the run.
    expect((await runsState(s))[0]?.['socket_replica']).toBe('replica-b');
    second.ws.terminate();
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
    expect((await runsState(s))[0]).not.toHaveProperty('socket_replica');
    expect(metricValue(await s.metrics(), 'longrun_websocket_parked_total')).toBe(2);
  });

  it('a close frame on the bridging replica stops the run as on the holder (WORKHORSE_WEBSOCKET_CLOSE_1000)', async () => {
    const { s, b } = await twoReplicas();
    const id = '7004';
    await parkOn(s, id, [{ op: 'client', action: { runReadFile: { filepath: 'a.txt' } } }, { op: 'hang' }]);
    const second = await open(b);
    second.send(resume(id));
    await second.next('runReadFile');
    second.ws.close(1000);
    await expect.poll(() => s.gateway.registry.size, { timeout: 5_000 }).toBe(0);
    expect(s.workflow.callsFor(id)[0]?.stopReasons).toEqual(['WORKHORSE_WEBSOCKET_CLOSE_1000']);
  });

  it('a start with input, or of another actor, on the other replica stops the parked run (PING_FAILED) and goes to the service', async () => {
    const { s, b } = await twoReplicas();
    const id = '7005';
    await parkOn(s, id, [{ op: 'client', action: { runReadFile: { filepath: 'a.txt' } } }, { op: 'hang' }]);
    const second = await open(b);
    second.send(start(id, [{ op: 'checkpoint', text: 'the new prompt' }, { op: 'end' }]));
    expect(await second.closed).toEqual({ code: 1000, reason: '' });
    const calls = s.workflow.callsFor(id);
    expect(calls).toHaveLength(2);
    expect(calls[0]?.stopReasons).toEqual(['WORKHORSE_WEBSOCKET_PING_FAILED']);
    expect(second.frames.map(summary)).toEqual(['the new prompt']);
    expect(metricValue(await s.metrics(), 'longrun_websocket_park_ends_total', { why: 'taken_over' })).toBe(1);

    s.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-7' });
    const id2 = '7006';
    await parkOn(s, id2, [{ op: 'client', action: { runReadFile: { filepath: 'a.txt' } } }, { op: 'hang' }]);
    s.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-8' });
    const other = await open(b);
    other.send(resume(id2));
    // Not the same actor: no re-attach — the parked run is stopped and the start goes to the service.
    await s.workflow.waitFor(() => s.workflow.callsFor(id2).length === 2, 5_000, 'a second call of 7006');
    expect(s.workflow.callsFor(id2)[0]?.stopReasons).toEqual(['WORKHORSE_WEBSOCKET_PING_FAILED']);
  });

  it('two connections racing for one parked run from two replicas: exactly one attaches, the other is 1013', async () => {
    const { s, b } = await twoReplicas();
    const id = '7007';
    await parkOn(s, id, [{ op: 'client', action: { runReadFile: { filepath: 'a.txt' } } }, { op: 'hang' }]);
    const [one, two] = await Promise.all([open(s), open(b)]);
    one.send(resume(id));
    two.send(resume(id));
    const loser = await Promise.race([one.closed.then(() => one), two.closed.then(() => two)]);
    expect(await loser.closed).toEqual({ code: 1013, reason: 'Failed to acquire lock on workflow' });
    const winner = loser === one ? two : one;
    expect(winner.ws.readyState).toBe(WebSocket.OPEN);
    expect(kindOf(await winner.next('runReadFile'))).toBe('runReadFile');
    expect(s.workflow.callsFor(id)).toHaveLength(1);
    expect((await runsState(s))[0]?.['state']).toBe('running');
  });

  it('a holder gone silent: its bridged client gets 1012, a claim it does not answer 1012; while its lease lives the run is held (1013)', async () => {
    const { s, b } = await twoReplicas();
    const id = '7008';
    const waiting = '7010';
    await parkOn(s, waiting, [{ op: 'client', action: { runReadFile: { filepath: 'w.txt' } } }, { op: 'hang' }]);
    const first = await open(s);
    first.send(start(id, [{ op: 'client', action: { runReadFile: { filepath: 'a.txt' } } }, { op: 'hang' }]));
    await first.next('runReadFile');
    first.ws.terminate();
    await expect.poll(async () => (await runsState(s)).find((r) => r['workflow_id'] === id)?.['state'], { timeout: 5_000 }).toBe('parked');
    const bridged = await open(b);
    bridged.send(resume(id));
    await bridged.next('runReadFile');
    // The holder's bridges go quiet (as a replica SIGSTOPped or cut off): no beat, no answer.
    await closeBridgesOf(s);
    expect(await bridged.closed).toEqual({ code: 1012, reason: 'the run is unreachable from this replica: reconnect' });
    expect(metricValue(await b.metrics(), 'longrun_bridge_breaks_total', { why: 'peer_silent' })).toBe(1);
    // Its run record says parked, but nobody answers the claim.
    const claim = await open(b);
    claim.send(resume(waiting));
    expect(await claim.closed).toEqual({ code: 1012, reason: 'the run is unreachable from this replica: reconnect' });
    expect(metricValue(await b.metrics(), 'longrun_bridge_breaks_total', { why: 'unanswered' })).toBe(1);
    // The bridged run's record says running (the holder never learnt of the loss): held under its lease.
    const again = await open(b);
    again.send(resume(id));
    expect(await again.closed).toEqual({ code: 1013, reason: 'Failed to acquire lock on workflow' });
    expect(s.workflow.callsFor(id)).toHaveLength(1);
    expect(s.workflow.callsFor(waiting)).toHaveLength(1);
  });

  it('a bridged client that never reads: the holder pauses at the high-water mark (nothing piles up in Redis or either replica) and the run ends at the write timeout', async () => {
    // Pongs are waited for longer than the write: the stall, not the silence, ends it.
    const slow = { LONGRUN_WS_WRITE_TIMEOUT_MS: '1500', LONGRUN_WS_PONG_TIMEOUT_MS: '10000' };
    stack = await startStack({ redis: 'own', env: { ...ENV, ...slow, LONGRUN_REPLICA_ID: 'replica-a' } });
    stack.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-7' });
    const s = stack;
    const b = await s.startReplica({ env: { ...slow, LONGRUN_REPLICA_ID: 'replica-b' } });
    const id = '7011';
    const big: Step = { op: 'repeat', times: 300, steps: [{ op: 'checkpoint', bytes: 100_000 }] };
    const readA = await parkOn(s, id, [{ op: 'client', action: { runReadFile: { filepath: 'a.txt' } }, expect: { plainTextResponse: { response: 'A' } } }, big, { op: 'hang' }]);
    const flood = await open(b);
    flood.send(resume(id));
    await flood.next('runReadFile');
    // Stops reading from its socket, then answers: 30 MB of checkpoints follow.
    (flood.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    flood.send({ actionResponse: { requestID: readA['requestID'], plainTextResponse: { response: 'A' } } });
    let inboxMax = 0;
    const sampling = setInterval(() => {
      void s.client?.xlen(inboxKey('replica-b')).then(
        (n) => (inboxMax = Math.max(inboxMax, n)),
        () => undefined,
      );
    }, 20);
    await expect.poll(() => s.gateway.registry.size, { timeout: 15_000 }).toBe(0);
    clearInterval(sampling);
    expect(s.logs()).toContain('websocket client took nothing: ending the run');
    const framesOut = metricValue(await b.metrics(), 'longrun_websocket_frames_total', { direction: 'out' }) ?? 0;
    expect(framesOut).toBeLessThan(150);
    // Frames are read out of the inbox as they come: at most the high-water mark's worth (1 MiB in 100 kB frames) waits there.
    expect(inboxMax).toBeLessThanOrEqual(12);
    await expect.poll(async () => metricValue(await b.metrics(), 'longrun_bridges_open', { side: 'socket' }), { timeout: 5_000 }).toBe(0);
  });

  it('a Redis restart under a bridge: the holder takes the lock the restart lost back under the store fence; the bridge goes on, or breaks (1012) and the reconnect re-attaches to the same call — refused 1013 until it can; the turn finishes in one call', async () => {
    const { s, b } = await twoReplicas();
    const id = '7012';
    await parkOn(s, id, twoReads);
    const bridged = await open(b);
    bridged.send(resume(id));
    const readA = await bridged.next('runReadFile');
    await s.redis?.restart();
    await expect.poll(async () => metricValue(await s.metrics(), 'longrun_lock_operations_total', { op: 'renew', result: 'reasserted' }), { timeout: 10_000 }).toBe(1);
    expect(await s.client?.get(lockKey(id))).toBeTruthy();
    // Whether a bridge message went with the inboxes decides if the bridge breaks; either way the client's answer gets through.
    let client = bridged;
    const refused: number[] = [];
    const broke = await Promise.race([bridged.closed.then(({ code }) => code), new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 1_500))]);
    if (broke !== undefined) {
      expect(broke).toBe(1012);
      let again: Client | undefined;
      while (!again && refused.length < 50) {
        const attempt = await open(b);
        attempt.send(resume(id));
        const outcome = await Promise.race([
          attempt
            .next('runReadFile')
            .catch(() => undefined)
            .then((f) => (f ? ('attached' as const) : undefined)),
          attempt.closed.then(({ code }) => code),
        ]);
        if (outcome === 'attached') again = attempt;
        else if (outcome !== undefined) {
          refused.push(outcome);
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
      expect(again).toBeDefined();
      client = again as Client;
    }
    expect(refused.filter((code) => code !== 1013)).toEqual([]);
    client.send({ actionResponse: { requestID: readA['requestID'], plainTextResponse: { response: 'A' } } });
    const readB = await client.next('runReadFile', 2);
    client.send({ actionResponse: { requestID: readB['requestID'], plainTextResponse: { response: 'B' } } });
    expect(await client.closed).toEqual({ code: 1000, reason: '' });
    // One call all along: no resume, no stop, every answer once.
    expect(s.workflow.callsFor(id)).toHaveLength(1);
    expect(s.workflow.callsFor(id)[0]).toMatchObject({ stopReasons: [], protocolErrors: [], ended: { how: 'ok' } });
  });

  it('a forged or replayed claim through Redis: one for a run not parked gets none, a replay is ignored, and a claimant that never beats loses the run back to parked', async () => {
    const { s } = await twoReplicas();
    const id = '7013';
    const readA = await parkOn(s, id, twoReads);
    const forge = (header: Record<string, unknown>): Promise<unknown> =>
      s.client?.xadd(inboxKey('replica-a'), '*', 'f', 'replica-x', 'h', JSON.stringify(header)) as Promise<unknown>;
    const answers = async (): Promise<string[]> => {
      const entries = (await s.client?.xrange(inboxKey('replica-x'), '-', '+')) ?? [];
      return entries.map(([, fields]) => fields[fields.indexOf('h') + 1] as string);
    };
    // A claim for a workflow not parked here: answered none (the claimant starts it as any session, under the lock).
    await forge({ t: 'claim', b: 'forged.1', s: 1, wf: '7014', actor: 'user-7', input: false });
    await expect.poll(answers, { timeout: 5_000 }).toEqual([JSON.stringify({ t: 'claimed', b: 'forged.1', s: 1, outcome: 'none' })]);
    // The right actor attaches — Redis is the trust boundary, as for the lock — then a replay of the same claim is ignored.
    await forge({ t: 'claim', b: 'forged.2', s: 1, wf: id, actor: 'user-7', input: false });
    await forge({ t: 'claim', b: 'forged.2', s: 1, wf: id, actor: 'user-7', input: false });
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('running');
    // replica-x never beats: after the pong timeout its bridge is given up and the run parks again for its real client.
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 10_000 }).toBe('parked');
    expect(metricValue(await s.metrics(), 'longrun_bridge_breaks_total', { why: 'peer_silent' })).toBe(1);
    expect((await answers()).filter((h) => h.includes('"claimed"'))).toHaveLength(2);
    const real = await open(s);
    real.send(resume(id));
    expect(await real.next('runReadFile')).toEqual(readA);
    expect(s.workflow.callsFor(id)).toHaveLength(1);
    await s.client?.del(inboxKey('replica-x'));
  });

  it('Redis cannot say where the run is: a resume is closed 1012 rather than started beside it', async () => {
    const { s, b } = await twoReplicas();
    const id = '7009';
    await parkOn(s, id, [{ op: 'client', action: { runReadFile: { filepath: 'a.txt' } } }, { op: 'hang' }]);
    process.kill(s.redis?.pid as number, 'SIGSTOP');
    const other = await open(b);
    other.send(resume(id));
    expect(await other.closed).toEqual({ code: 1012, reason: 'the run is unreachable from this replica: reconnect' });
    resumeRedis(s.redis);
    expect(s.workflow.callsFor(id)).toHaveLength(1);
  });
});

/** Stops the stack's gateway reading and beating on its bridges (its inbox closed): to the others it has gone silent. */
async function closeBridgesOf(s: Stack): Promise<void> {
  const bridges = (s.gateway as unknown as { parts: { websockets: { deps: { bridges?: { close(): Promise<void> } } } } }).parts.websockets.deps.bridges;
  if (!bridges) throw new Error('the gateway has no bridges');
  await bridges.close();
}
