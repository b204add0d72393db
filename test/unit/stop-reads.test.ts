/**
 * Stop-key reads before actions (docs/spec.md §5), batched (src/coordination/stop-reads.ts): the
 * reads asked for in one turn of the event loop share one read of many keys, a read asked
 * for while one is out waits for the next, and every caller gets its own key's answer
 * from a read sent after it asked.
 */
import { describe, expect, it } from 'vitest';
import { StopReads } from '../../src/coordination/stop-reads';

/** A store of stop keys that records each batch read and answers when told to. */
function store() {
  const keys = new Map<string, string>();
  const batches: Array<{ ids: string[]; answer: () => void; fail: (err: Error) => void }> = [];
  const read = (ids: string[]) =>
    new Promise<Array<string | null>>((resolve, reject) => {
      batches.push({ ids, answer: () => resolve(ids.map((id) => keys.get(id) ?? null)), fail: reject });
    });
  return { keys, batches, read };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('StopReads', () => {
  it('reads asked for in one turn go as one batch; each caller gets its own key', async () => {
    const s = store();
    s.keys.set('b', 'USER_STOP');
    const reads = new StopReads(s.read);
    const answers = Promise.all(['a', 'b', 'c'].map((id) => reads.read(id)));
    await turn();
    expect(s.batches.map((b) => b.ids)).toEqual([['a', 'b', 'c']]);
    s.batches[0]?.answer();
    expect(await answers).toEqual([null, 'USER_STOP', null]);
  });

  it('a read asked for while one is out waits for it, then goes in a batch of its own', async () => {
    const s = store();
    const reads = new StopReads(s.read);
    const first = reads.read('w');
    await turn();
    // An action arrives while the first read is out: it is not folded into that read.
    s.keys.set('w', 'USER_STOP');
    const second = reads.read('w');
    const third = reads.read('v');
    await turn();
    expect(s.batches).toHaveLength(1);
    s.batches[0]?.answer();
    expect(await first).toBe('USER_STOP');
    await turn();
    expect(s.batches.map((b) => b.ids)).toEqual([['w'], ['w', 'v']]);
    s.batches[1]?.answer();
    expect(await Promise.all([second, third])).toEqual(['USER_STOP', null]);
  });

  it('a failed read rejects every caller of its batch, and the next batch still goes', async () => {
    const s = store();
    const reads = new StopReads(s.read);
    const failed = Promise.allSettled([reads.read('a'), reads.read('b')]);
    await turn();
    s.batches[0]?.fail(new Error('redis read stops failed: timeout'));
    expect((await failed).map((r) => r.status)).toEqual(['rejected', 'rejected']);
    const next = reads.read('a');
    await turn();
    expect(s.batches).toHaveLength(2);
    s.batches[1]?.answer();
    expect(await next).toBeNull();
  });

  it('a store that throws at once rejects the batch instead of throwing into the event loop', async () => {
    const reads = new StopReads(() => {
      throw new Error('not connected');
    });
    await expect(reads.read('a')).rejects.toThrow('not connected');
  });
});
