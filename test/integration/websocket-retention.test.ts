/**
 * What a WebSocket run keeps of what it no longer needs (issue [26]): a replica's heap grew
 * 33 MB an hour under reconnecting clients. Each case asserts, after full collections in
 * this process (where the gateways run), that an object the gateway no longer needs is gone:
 *
 * - a bridge given up on the holder keeps, for a late answer, the run's sink — never the
 *   ended run (its whole gRPC call, coordination, lease): it held 10 000 given-up links, each
 *   with the run it had served;
 * - a connection a run was served on is let go once it is lost, not when the run ends: every
 *   connection of an hour-long run, one every few seconds, was kept until its end;
 * - a run lost while it was being opened, whose start then failed, leaves the parked runs: it
 *   held its session slot for ever, and a resume start of its workflow attached to nothing;
 *   one that re-attached while it was being opened is closed as the start was (it waited for ever);
 * - what a client sends while its run is being started is kept for it, up to 1 MiB: past it the
 *   client is flooding, and is closed 1008 (it was kept whole, however much, for seconds).
 *
 * Real gateways (in this process, so their objects can be watched with WeakRefs), simulators
 * and redis-server.
 */
import { channel, type Channel } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import { WEBSOCKET_PREAUTH } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import { metricValue, startStack, type Stack } from '../../stack';
import { kindOf, openSession, resume, runsState, start, type Client } from '../helpers/ws-session';

// A full collection on demand, in this process (vitest's worker is not started with --expose-gc).
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

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
  LONGRUN_WS_CLOSE_TIMEOUT_MS: '500',
};

/** Whether `ref`'s object is collected within a few seconds of full collections (timers that held it a moment run out meanwhile). */
async function collected(ref: WeakRef<object>): Promise<boolean> {
  for (let i = 0; i < 30; i++) {
    gc();
    if (ref.deref() === undefined) return true;
    await sleep(100);
  }
  return false;
}

/** The Run in flight for `id` on `s`, weakly: the test itself must not keep it. */
const runRef = (s: Pick<Stack, 'gateway'>, id: string): WeakRef<object> => new WeakRef(s.gateway.registry.runsOf(id)[0] as object);

const reads = (n: number): Step[] => [
  ...Array.from({ length: n }, (_, i): Step => ({ op: 'client', action: { runReadFile: { filepath: `${i}.txt` } }, expect: { plainTextResponse: { response: `${i}` } } })),
  { op: 'end' },
];

const answer = (client: Client, read: Record<string, unknown>): void =>
  client.send({ actionResponse: { requestID: read['requestID'], plainTextResponse: { response: (read['runReadFile'] as { filepath: string }).filepath.replace('.txt', '') } } });

describe('what a WebSocket run lets go', () => {
  it('a bridge given up on its holder keeps no ended run: the run a bridged client left is collected once it ends', async () => {
    stack = await startStack({ redis: 'own', env: { ...ENV, LONGRUN_REPLICA_ID: 'replica-a' } });
    stack.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-7' });
    const s = stack;
    const b = await s.startReplica({ env: { LONGRUN_REPLICA_ID: 'replica-b' } });
    const id = '8001';
    const first = await open(s);
    first.send(start(id, reads(2)));
    const read0 = await first.next('runReadFile');
    const run = runRef(s, id);
    first.ws.terminate();
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
    // Bridged from replica-b, then lost there: the holder gives its link up and parks the run again.
    const bridged = await open(b);
    bridged.send(resume(id));
    expect(await bridged.next('runReadFile')).toEqual(read0);
    bridged.ws.terminate();
    await expect.poll(async () => metricValue(await s.metrics(), 'longrun_bridges_open', { side: 'holder' }), { timeout: 5_000 }).toBe(0);
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
    // Back on the holder, the turn finishes.
    const back = await open(s);
    back.send(resume(id));
    answer(back, await back.next('runReadFile'));
    answer(back, await back.next('runReadFile', 2));
    expect(await back.closed).toEqual({ code: 1000, reason: '' });
    await expect.poll(() => s.gateway.registry.size, { timeout: 5_000 }).toBe(0);
    expect(await collected(run), 'the ended run is collected').toBe(true);
  });

  it('a connection a run was served on is let go once lost, while the run goes on', async () => {
    stack = await startStack({ redis: 'own', env: ENV });
    stack.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-7' });
    const s = stack;
    const port = Number(new URL(s.url).port);
    // The server side of every connection the main listener accepts, weakly.
    const sockets: Array<WeakRef<Socket>> = [];
    const accepted: Channel = channel('net.server.socket');
    const onSocket = (message: unknown): void => {
      const { socket } = message as { socket: Socket };
      if (socket.localPort === port) sockets.push(new WeakRef(socket));
    };
    accepted.subscribe(onSocket);
    try {
      const id = '8002';
      const drops = 4;
      let client = await open(s);
      client.send(start(id, reads(drops + 1)));
      for (let i = 1; i <= drops; i++) {
        const read = await client.next('runReadFile');
        expect(kindOf(read)).toBe('runReadFile');
        client.ws.terminate();
        await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000 }).toBe('parked');
        client = await open(s);
        client.send(resume(id));
        answer(client, await client.next('runReadFile'));
        await client.next('runReadFile', 2);
        // The next read is this connection's first unanswered one: dropping it again goes on from there.
        client.frames.splice(0, 1);
      }
      expect(s.gateway.registry.size, 'the run goes on').toBe(1);
      expect(sockets.length).toBeGreaterThanOrEqual(drops + 1);
      // Every connection but the one serving the run now is gone.
      const lost = sockets.slice(0, drops);
      const kept: number[] = [];
      for (const [i, ref] of lost.entries()) if (!(await collected(ref))) kept.push(i);
      expect(kept, 'connections lost and still held').toEqual([]);
    } finally {
      accepted.unsubscribe(onSocket);
    }
  });

  it('a run lost while it was being opened, whose start then failed, gives its session slot back and is not re-attached to', async () => {
    // The service's first stream opens slower than the gateway waits for it (its connection is made through a slow
    // front): that start fails, the service unavailable. The next one goes on the connection made meanwhile.
    stack = await startStack({
      redis: 'own',
      env: { ...ENV, LONGRUN_STREAM_OPEN_TIMEOUT_MS: '1000', LONGRUN_MAX_WS_SESSIONS: '1' },
      workflow: { front: { latencyMs: 1_500 } },
    });
    stack.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-7' });
    const s = stack;
    const id = '8003';
    const first = await open(s);
    first.send(start(id, reads(1)));
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000, interval: 20 }).toBeDefined();
    // Lost while its stream is being opened: the run parks for the client's re-attach.
    first.ws.terminate();
    await expect.poll(() => s.gateway.registry.size, { timeout: 5_000 }).toBe(0);
    expect(s.logs()).not.toContain('internal error');
    // Its slot is free again (LONGRUN_MAX_WS_SESSIONS=1: the ghost of the failed start held it, and this upgrade was refused 503)...
    const again = await open(s);
    // ...and a resume start of the workflow is started anew, not attached to a run that does not exist.
    again.send(resume(id));
    await again.next('newCheckpoint');
    expect(await again.closed).toEqual({ code: 1000, reason: '' });
  });

  it('a connection that re-attached to a run still being opened is closed as its start is when that start fails, not left waiting', async () => {
    stack = await startStack({ redis: 'own', env: { ...ENV, LONGRUN_STREAM_OPEN_TIMEOUT_MS: '1500' }, workflow: { front: { latencyMs: 2_000 } } });
    stack.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-7' });
    const s = stack;
    const id = '8005';
    const first = await open(s);
    first.send(start(id, reads(1)));
    await expect.poll(async () => (await runsState(s))[0]?.['state'], { timeout: 5_000, interval: 20 }).toBeDefined();
    first.ws.terminate();
    // The resume finds the run parked while its stream is still being opened, and re-attaches to it.
    const again = await open(s);
    again.send(resume(id));
    const closed = await Promise.race([again.closed, sleep(8_000).then(() => 'still waiting' as const)]);
    expect(closed).toEqual({ code: 1001, reason: 'duo workflow service unavailable' });
    expect(s.gateway.registry.size).toBe(0);
  });

  it('a client that floods while its run is being started is closed 1008, the start cancelled, nothing kept', async () => {
    // The service's stream takes a while to open: the start is under way for seconds.
    stack = await startStack({ redis: 'own', env: { ...ENV, LONGRUN_STREAM_OPEN_TIMEOUT_MS: '5000' }, workflow: { front: { latencyMs: 1_000 } } });
    stack.owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: 'user-7' });
    const s = stack;
    const id = '8004';
    const client = await open(s);
    client.send(start(id, reads(1)));
    const answer = JSON.stringify({ actionResponse: { requestID: '1', plainTextResponse: { response: 'x'.repeat(64 * 1024) } } });
    // 2 MiB of answers to actions nobody has asked for yet.
    for (let i = 0; i < 32; i++) client.ws.send(answer);
    expect(await client.closed).toEqual({ code: 1008, reason: 'too many events before the run started' });
    await expect.poll(() => s.gateway.registry.size, { timeout: 10_000 }).toBe(0);
    await expect.poll(async () => (await s.client?.keys('*'))?.filter((k) => k.includes(id)), { timeout: 5_000 }).toEqual([]);
  });
});
