/**
 * Beats between replicas (src/websocket/bridge/bridges.ts): each lists the bridges the sender still
 * has with the receiver, and a holder gives up a bridge the socket's replica no longer
 * lists (peer_dropped). A claim still out is listed too: the holder may have attached it
 * already, and a beat that left it out — one sent in the moment between the claim and its
 * answer — made the holder give up a bridge it had just attached (the client closed 1012
 * one beat later; in the ws_resume benchmark about one bridged re-attach in a hundred).
 * A replica with nothing left with another tells it so once, then stops beating to it.
 */
import { describe, expect, it } from 'vitest';
import { Bridges } from '../../src/websocket/bridge/bridges';
import { LateSink } from '../../src/websocket/bridge/late-answers';
import type { BridgeHeader, BridgeMessage, BridgeTransport } from '../../src/websocket/bridge/protocol';
import type { CoordinationBackend } from '../../src/coordination/backend';
import { createLogger } from '../../src/core/log';
import { GatewayMetrics } from '../../src/gateway-metrics';

function fakeTransport(replicaId: string): BridgeTransport & { sent: Array<{ to: string; header: BridgeHeader }>; deliver(message: BridgeMessage): void; reachable: boolean } {
  let handler: (message: BridgeMessage) => void = () => undefined;
  const sent: Array<{ to: string; header: BridgeHeader }> = [];
  return {
    replicaId,
    reachable: true,
    sent,
    send: (to, header) => {
      sent.push({ to, header });
      return Promise.resolve();
    },
    onMessage: (h) => (handler = h),
    close: () => Promise.resolve(),
    deliver: (message) => handler(message),
  };
}

describe('beats', () => {
  it('a claim still out is listed in the beat to its holder; attached, it still is; done, it is not, once, and the beats stop', async () => {
    const transport = fakeTransport('replica-b');
    const bridges = new Bridges({
      transport,
      backend: {} as CoordinationBackend,
      parked: new Map(),
      metrics: new GatewayMetrics({ defaultMetrics: false }).websocket,
      logger: createLogger('error'),
      settings: { beatMs: 20, deadAfterMs: 10_000, claimTimeoutMs: 10_000, stallMs: 10_000 },
    });
    const link = bridges.claim('replica-a', '7001', 'user-7', false, { sendFrame: () => 'ok' });
    const beats = (): string[][] =>
      transport.sent.filter((m) => m.to === 'replica-a' && m.header.t === 'beat').map((m) => (m.header as Extract<BridgeHeader, { t: 'beat' }>).sockets);
    await expect.poll(() => beats().length, { timeout: 2_000 }).toBeGreaterThan(0);
    expect(beats()[0]).toEqual([link.id]);

    transport.deliver({ from: 'replica-a', header: { t: 'claimed', b: link.id, s: 1, outcome: 'attached' } });
    expect(await link.outcome).toBe('attached');
    const before = beats().length;
    await expect.poll(() => beats().length, { timeout: 2_000 }).toBeGreaterThan(before);
    expect(beats().at(-1)).toEqual([link.id]);

    link.park();
    const after = beats().length;
    await expect.poll(() => beats().length, { timeout: 2_000 }).toBeGreaterThan(after);
    expect(beats().at(-1)).toEqual([]);
    // Told once that nothing is left, then no more beats (five beat periods later).
    const told = beats().length;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(beats().length).toBe(told);
    await bridges.close();
  });
});

describe('a bridge and the holder’s view of it', () => {
  const settings = { beatMs: 20, deadAfterMs: 300, claimTimeoutMs: 10_000, stallMs: 10_000 };

  /** A run parked on the holder, as bridges.ts sees it (client-run.ts), recording what reaches it. */
  function parkedRun() {
    const received: unknown[] = [];
    let parks = 0;
    const fromClient = (event: unknown): boolean => received.push(event) > 0;
    const run = {
      resumableBy: () => true,
      attach: () => undefined,
      servedOn: () => true,
      park: () => (parks += 1) > 0,
      stop: () => undefined,
      fromClient,
      lateSink: new LateSink({ fromClient }),
    };
    return { run, received, parks: () => parks };
  }

  function holderOf(parked: Map<string, unknown>) {
    const transport = fakeTransport('replica-a');
    const bridges = new Bridges({
      transport,
      backend: {} as CoordinationBackend,
      parked: parked as never,
      metrics: new GatewayMetrics({ defaultMetrics: false }).websocket,
      logger: createLogger('silent'),
      settings,
    });
    return { transport, bridges };
  }

  const answer = (requestID: string) => Buffer.from(JSON.stringify({ actionResponse: { requestID, plainTextResponse: { response: 'done' } } }));

  it('an answer the socket side sent before it learnt the bridge was given up still reaches the run (once given up, nothing else does)', async () => {
    const { run, received, parks } = parkedRun();
    const { transport, bridges } = holderOf(new Map([['7101', run]]));
    transport.deliver({ from: 'replica-b', header: { t: 'claim', b: 'bridge-1', s: 1, wf: '7101', actor: 'user-7', input: false } });
    // The socket's replica no longer lists the bridge: the holder gives it up and parks the run again.
    transport.deliver({ from: 'replica-b', header: { t: 'beat', holding: [], sockets: [] } });
    expect(parks()).toBe(1);
    // What the socket side sent before it knew: the answer goes to the run; a heartbeat or a stop does not.
    transport.deliver({ from: 'replica-b', header: { t: 'event', b: 'bridge-1', s: 2 }, data: answer('7') });
    transport.deliver({ from: 'replica-b', header: { t: 'event', b: 'bridge-1', s: 3 }, data: Buffer.from(JSON.stringify({ heartbeat: { timestamp: '1' } })) });
    transport.deliver({ from: 'replica-b', header: { t: 'stop', b: 'bridge-1', s: 4, reason: { kind: 'client_gone' } } });
    // Another replica cannot use the bridge's id.
    transport.deliver({ from: 'replica-c', header: { t: 'event', b: 'bridge-1', s: 5 }, data: answer('8') });
    expect(received).toEqual([{ actionResponse: { requestID: '7', plainTextResponse: { response: 'done' } } }]);
    await bridges.close();
  });

  it('while this replica cannot reach Redis no peer counts as silent; once it can, a peer has the whole deadline to be heard again', async () => {
    const { run, parks } = parkedRun();
    const { transport, bridges } = holderOf(new Map([['7102', run]]));
    transport.deliver({ from: 'replica-b', header: { t: 'claim', b: 'bridge-2', s: 1, wf: '7102', actor: 'user-7', input: false } });
    transport.reachable = false;
    // Three deadlines without a word from the peer, Redis away all along: the bridge stays.
    await new Promise((resolve) => setTimeout(resolve, 3 * settings.deadAfterMs));
    expect(parks()).toBe(0);
    transport.reachable = true;
    await new Promise((resolve) => setTimeout(resolve, settings.deadAfterMs / 3));
    expect(parks()).toBe(0);
    // Still nothing from it a deadline after Redis came back: the peer is silent, the run parks again.
    await expect.poll(() => parks(), { timeout: 5 * settings.deadAfterMs, interval: 20 }).toBe(1);
    await bridges.close();
  });

  it('what the holder keeps of a given-up bridge goes in time, and a replica it has no bridge with is not remembered', async () => {
    const { run, received } = parkedRun();
    const { transport, bridges } = holderOf(new Map([['7103', run]]));
    transport.deliver({ from: 'replica-b', header: { t: 'claim', b: 'bridge-3', s: 1, wf: '7103', actor: 'user-7', input: false } });
    expect(bridges.held).toMatchObject({ holders: 1, peers_heard: 1, late_answers: 0 });
    transport.deliver({ from: 'replica-b', header: { t: 'beat', holding: [], sockets: [] } });
    expect(bridges.held).toMatchObject({ holders: 0, peers_heard: 0, late_answers: 1 });
    // Beats of a replica this one has no bridge with leave nothing behind.
    transport.deliver({ from: 'replica-c', header: { t: 'beat', holding: [], sockets: [] } });
    transport.deliver({ from: 'replica-b', header: { t: 'beat', holding: [], sockets: [] } });
    expect(bridges.held.peers_heard).toBe(0);
    // Twice the peer's deadline and two beats later, a late answer finds nothing, and the beats have stopped.
    await expect.poll(() => bridges.held, { timeout: 5 * settings.deadAfterMs, interval: 20 }).toMatchObject({ late_answers: 0, beating: 0 });
    transport.deliver({ from: 'replica-b', header: { t: 'event', b: 'bridge-3', s: 2 }, data: answer('9') });
    expect(received).toEqual([]);
    await bridges.close();
  });
});
