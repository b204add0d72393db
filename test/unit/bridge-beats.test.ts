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
import type { BridgeHeader, BridgeMessage, BridgeTransport } from '../../src/websocket/bridge/protocol';
import type { CoordinationBackend } from '../../src/coordination/backend';
import { createLogger } from '../../src/core/log';
import { Metrics } from '../../src/observability/metrics';

function fakeTransport(replicaId: string): BridgeTransport & { sent: Array<{ to: string; header: BridgeHeader }>; deliver(message: BridgeMessage): void } {
  let handler: (message: BridgeMessage) => void = () => undefined;
  const sent: Array<{ to: string; header: BridgeHeader }> = [];
  return {
    replicaId,
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
      metrics: new Metrics({ defaultMetrics: false }),
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
