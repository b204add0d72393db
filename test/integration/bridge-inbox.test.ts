/**
 * The bridge's inbox (src/websocket/bridge/inbox.ts, bridge-send-1.lua, bridge-trim-1.lua) on a real
 * redis-server: what is appended after the reader emptied its inbox — even within the same
 * millisecond — sorts after everything it read, so the reader sees it, and an emptied inbox
 * does not stay. Before, an emptied inbox was deleted at once, a stream made anew numbered
 * from `<ms>-0`, and the reader, reading after `<ms>-<n>`, never saw it: a bridged action
 * never delivered (the session hung), or an answer never received (the bridge broke on the
 * gap) — about one bridged session in six in the ws_resume benchmark.
 */
import path from 'node:path';
import Redis from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisInbox } from '../../src/websocket/bridge/inbox';
import { inboxKey } from '../../src/redis/keys';
import type { BridgeMessage } from '../../src/websocket/bridge/protocol';
import { luaCommand } from '../../src/redis/scripts';
import { parseRedisUrl } from '../../src/redis/url';
import { startRedis, type RedisServer } from '../../stack/redis-server';

let server: RedisServer;
let redis: Redis;
// The inbox's own scripts, as the one loader reads them, sent inside MULTI to force one millisecond.
const bridgeDir = path.join(__dirname, '..', '..', 'src', 'websocket', 'bridge');
const bridgeSend = luaCommand(bridgeDir, 'bridge-send-1.lua');
const bridgeTrim = luaCommand(bridgeDir, 'bridge-trim-1.lua');

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
});

afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

/** `a` > `b`, as stream ids (`ms-seq`). */
function after(a: string, b: string): boolean {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am > bm || (am === bm && as > bs);
}

describe('the inbox', () => {
  it('an inbox emptied, then appended to in the same transaction (the same millisecond): the new entry sorts after the last one read; emptied, it expires', async () => {
    const key = inboxKey('inbox-test');
    const send = (tx: ReturnType<Redis['multi']>, n: number): unknown => tx.eval(bridgeSend.lua, bridgeSend.numberOfKeys, key, 60_000, 1_000, 'n', String(n));
    for (let round = 0; round < 20; round++) {
      const tx = redis.multi();
      for (let n = 0; n < 5; n++) send(tx, n);
      const replies = (await tx.exec()) ?? [];
      const lastRead = String(replies[replies.length - 1]?.[1]);
      // The reader trims what it read (bridge-trim-1.lua): the inbox is empty, so deleted; then a sender appends.
      const next = redis.multi();
      next.eval(bridgeTrim.lua, bridgeTrim.numberOfKeys, key, `${lastRead.split('-')[0]}-${Number(lastRead.split('-')[1]) + 1}`, 1_000);
      send(next, 5);
      const [[, left] = [], [, added] = []] = (await next.exec()) ?? [];
      expect(left).toBe(0);
      expect(after(String(added), lastRead), `round ${round}: ${String(added)} after ${lastRead}`).toBe(true);
      await redis.del(key);
    }
    const last = String(await redis.eval(bridgeSend.lua, bridgeSend.numberOfKeys, key, 60_000, 1_000, 'n', 'last'));
    expect(await redis.eval(bridgeTrim.lua, bridgeTrim.numberOfKeys, key, `${last.split('-')[0]}-${Number(last.split('-')[1]) + 1}`, 200)).toBe(0);
    expect(await redis.exists(key)).toBe(1);
    await expect.poll(() => redis.exists(key), { timeout: 2_000 }).toBe(0);
  });

  it('a burst read and trimmed as it comes arrives whole and in order', async () => {
    const target = parseRedisUrl(server.url);
    const settings = { commandTimeoutMs: 2_000, connectTimeoutMs: 2_000, ttlMs: 60_000, blockMs: 100 };
    const a = new RedisInbox(target, 'burst-a', settings);
    const b = new RedisInbox(target, 'burst-b', settings);
    const got: number[] = [];
    try {
      // b reads from the server's clock when it started: wait until it hears a's probes.
      let heard = false;
      b.onMessage(() => (heard = true));
      while (!heard) {
        await a.send('burst-b', { t: 'beat', holding: [], sockets: [] }).catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      b.onMessage((m: BridgeMessage) => {
        if (m.header.t === 'event') got.push(m.header.s);
      });
      // Small bursts, each read (and the inbox emptied) before the next is sent.
      let s = 0;
      for (let burst = 0; burst < 200; burst++) {
        const sends: Array<Promise<void>> = [];
        for (let i = 0; i < 5; i++) sends.push(a.send('burst-b', { t: 'event', b: 'x', s: ++s }));
        await Promise.all(sends);
        await new Promise((resolve) => setImmediate(resolve));
      }
      await expect.poll(() => got.length, { timeout: 5_000 }).toBe(s);
      expect(got).toEqual(Array.from({ length: s }, (_, i) => i + 1));
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
