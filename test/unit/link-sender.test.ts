/**
 * A bridge's sends through a Redis outage (src/websocket/bridge/link-sender.ts): a send that fails holds
 * every later one, and they go out in order once the store takes them again; beats never
 * report a message still waiting; a store that refuses for longer than the give-up time gives
 * the bridge up. Driven on a fake clock with a store that refuses while it is "down".
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LinkSender } from '../../src/websocket/bridge/link-sender';
import type { BridgeHeader } from '../../src/websocket/bridge/protocol';

const frame = (s: number): BridgeHeader => ({ t: 'frame', b: 'bridge-1', s });

function store() {
  const taken: number[] = [];
  let down = false;
  const send = (header: BridgeHeader): Promise<void> => {
    if (down) return Promise.reject(new Error('Connection is closed.'));
    if ('s' in header) taken.push(header.s);
    return Promise.resolve();
  };
  return { taken, send, setDown: (value: boolean) => void (down = value) };
}

beforeEach(() => void vi.useFakeTimers({ now: 0 }));
afterEach(() => void vi.useRealTimers());

describe('LinkSender', () => {
  it('sends in order through an outage: what failed and what came after wait, then go in order; the beat reports only what went', async () => {
    const redis = store();
    const gaveUp = vi.fn();
    const sender = new LinkSender(redis.send, 100, 5_000, gaveUp);
    const outcomes: Array<Promise<boolean>> = [sender.post(frame(1))];
    await vi.advanceTimersByTimeAsync(0);
    redis.setDown(true);
    outcomes.push(sender.post(frame(2)), sender.post(frame(3)));
    await vi.advanceTimersByTimeAsync(0);
    expect(sender.reportedSeq).toBe(1);
    outcomes.push(sender.post(frame(4)));
    await vi.advanceTimersByTimeAsync(350);
    expect(redis.taken).toEqual([1]);
    expect(sender.reportedSeq).toBe(1);
    redis.setDown(false);
    await vi.advanceTimersByTimeAsync(100);
    expect(redis.taken).toEqual([1, 2, 3, 4]);
    expect(sender.reportedSeq).toBe(4);
    expect(await Promise.all(outcomes)).toEqual([true, true, true, true]);
    // Back to sending at once.
    await sender.post(frame(5));
    expect(redis.taken).toEqual([1, 2, 3, 4, 5]);
    expect(gaveUp).not.toHaveBeenCalled();
  });

  it('a store that refuses for the give-up time gives the bridge up once, and what waited is not sent', async () => {
    const redis = store();
    const gaveUp = vi.fn();
    const sender = new LinkSender(redis.send, 100, 1_000, gaveUp);
    redis.setDown(true);
    const waited = [sender.post(frame(1)), sender.post(frame(2))];
    await vi.advanceTimersByTimeAsync(1_200);
    expect(gaveUp).toHaveBeenCalledTimes(1);
    expect(await Promise.all(waited)).toEqual([false, false]);
    redis.setDown(false);
    expect(await sender.post(frame(3))).toBe(false);
    await vi.advanceTimersByTimeAsync(500);
    expect(redis.taken).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('gives the bridge up once more than MAX_WAITING_BYTES wait, before the give-up time (issue [26]: a client sending through an outage)', async () => {
    const redis = store();
    const gaveUp = vi.fn();
    const sender = new LinkSender(redis.send, 100, 60_000, gaveUp);
    redis.setDown(true);
    const chunk = Buffer.alloc(1024 * 1024);
    const outcomes: Array<Promise<boolean>> = [];
    for (let s = 1; s <= 8; s++) outcomes.push(sender.post(frame(s), chunk));
    await vi.advanceTimersByTimeAsync(0);
    expect(gaveUp).not.toHaveBeenCalled();
    outcomes.push(sender.post(frame(9), chunk));
    await vi.advanceTimersByTimeAsync(0);
    expect(gaveUp).toHaveBeenCalledTimes(1);
    expect(await Promise.all(outcomes)).toEqual(outcomes.map(() => false));
    redis.setDown(false);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(redis.taken).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
  });
});
