/**
 * A followed workflow's feed (src/follow/feed.ts, docs/spec.md §14): whatever order and however
 * many times entries arrive — a replica's own appends and the log's delivery of them, a
 * delivery lost while its connection was down — its members get each id once, in order; a
 * gap is filled from the log, and what the log no longer holds is said once (the next
 * checkpoint is then a resync). Property-tested with fast-check over arrival orders.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { FollowEntry } from '../../src/follow/events';
import { Feed, type FeedMember } from '../../src/follow/feed';
import type { LogRead } from '../../src/follow/log';
import { MemoryFollowLog } from '../../src/follow/memory-log';

const entry = (id: number): FollowEntry => ({ id, kind: 'action', data: `{"n":${id}}` });

class Member implements FeedMember {
  readonly ids: number[] = [];
  losses: number[] = [];
  batches = 0;
  following = true;
  batch(): void {
    this.batches += 1;
  }
  receive(e: FollowEntry): void {
    this.ids.push(e.id);
  }
  lost(): void {
    this.losses.push(this.ids.length);
  }
  noRunInFlight(): void {}
}

/** A log whose reads answer from `held` (what the store still has), after a tick. */
function logHolding(held: () => FollowEntry[]): MemoryFollowLog {
  const log = new MemoryFollowLog({ ttlMs: 10_000, backlog: 1_000 });
  log.read = (_workflowId: string, after: number | undefined): Promise<LogRead> =>
    new Promise((resolve) =>
      setImmediate(() => resolve({ last: undefined, first: undefined, state: 'open', run: undefined, checkpoint: undefined, entries: held().filter((e) => e.id > (after ?? 0)) })),
    );
  return log;
}

const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 5));

describe('a feed', () => {
  it('holds entries until the first read says where the log stood, then hands on only what follows', async () => {
    const feed = new Feed(
      'w',
      logHolding(() => []),
    );
    const member = new Member();
    feed.members.add(member);
    feed.receive([entry(100), entry(101)]);
    expect(member.ids).toEqual([]);
    feed.noteRead(100);
    expect(member.ids).toEqual([101]);
  });

  it('delivers each id once and in order whatever the arrival order and repeats, filling gaps from the log', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 30 }), fc.array(fc.tuple(fc.nat(), fc.nat({ max: 4 })), { minLength: 1, maxLength: 40 }), async (count, deliveries) => {
        const all = Array.from({ length: count }, (_, i) => entry(1_000 + i + 1));
        const feed = new Feed(
          'w',
          logHolding(() => all),
        );
        const member = new Member();
        feed.members.add(member);
        feed.noteRead(1_000);
        // Batches of consecutive entries, delivered in any order, some twice, some never (the log has them all).
        for (const [start, length] of deliveries) {
          const from = start % count;
          feed.receive(all.slice(from, from + length));
        }
        feed.receive(all.slice(-1));
        await settle();
        await settle();
        expect(member.ids).toEqual(all.map((e) => e.id));
        expect(member.losses).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it('what the log no longer holds is lost: said once, before the entry after the jump', async () => {
    const feed = new Feed(
      'w',
      logHolding(() => [entry(8), entry(9)]),
    );
    const member = new Member();
    feed.members.add(member);
    feed.noteRead(1);
    feed.receive([entry(2)]);
    feed.receive([entry(9)]);
    await settle();
    expect(member.ids).toEqual([2, 8, 9]);
    expect(member.losses).toEqual([1]);
  });

  it('after the first read, a log that had nothing: the first entry starts it, whatever its id', () => {
    const feed = new Feed(
      'w',
      logHolding(() => []),
    );
    const member = new Member();
    feed.members.add(member);
    feed.noteRead(undefined);
    feed.receive([entry(5_000), entry(5_001)]);
    feed.receive([entry(5_002)]);
    expect(member.ids).toEqual([5_000, 5_001, 5_002]);
    expect(member.batches).toBe(2);
  });
});

describe('the memory log', () => {
  it('numbers consecutively from a seed of the clock, keeps the latest run and checkpoint beyond its backlog, reads after a position', async () => {
    const log = new MemoryFollowLog({ ttlMs: 10_000, backlog: 2 });
    const before = Date.now() * 1_000;
    const last = await log.append(
      'w',
      [
        { kind: 'run', data: '{"run_id":"r"}' },
        { kind: 'checkpoint', data: '{"c":1}' },
        { kind: 'action', data: '{}' },
        { kind: 'action', data: '{}' },
      ],
      'open',
    );
    expect(last).toBeGreaterThanOrEqual(before + 3);
    const read = await log.read('w', undefined);
    expect(read).toMatchObject({ last, first: last - 1, state: 'open', run: { id: last - 3 }, checkpoint: { id: last - 2 } });
    expect(read.entries.map((e) => e.id)).toEqual([last - 1, last]);
    expect((await log.read('w', last - 1)).entries.map((e) => e.id)).toEqual([last]);
    expect(await log.read('other', undefined)).toMatchObject({ last: undefined, entries: [] });
  });
});
