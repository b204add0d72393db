/**
 * readCapped (src/core/read-capped.ts), the one capped read of request and response
 * bodies: a body within the cap whole, past it the first `limit` bytes and how many were
 * seen, the stream left to the caller (paused or destroyed — a destroy's error raises
 * nothing), and a stream's own error rejected.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readCapped } from '../../src/core/read-capped';

function feed(chunks: string[], end = true): PassThrough {
  const stream = new PassThrough();
  for (const c of chunks) stream.write(c);
  if (end) stream.end();
  return stream;
}

describe('readCapped', () => {
  it('a body within the cap is read whole; overflow 0', async () => {
    expect(await readCapped(feed(['ab', 'cd']), 4, () => undefined)).toEqual({ data: Buffer.from('abcd'), overflow: 0 });
    expect(await readCapped(feed([]), 4, () => undefined)).toEqual({ data: Buffer.alloc(0), overflow: 0 });
  });

  it('past the cap: the first `limit` bytes, the bytes seen, and the stream handed to onOverflow at once', async () => {
    const stream = feed(['abc', 'defgh'], false);
    let handed: unknown;
    const read = await readCapped(stream, 5, (s) => {
      handed = s;
      s.pause();
    });
    expect(read).toEqual({ data: Buffer.from('abcde'), overflow: 8 });
    expect(handed).toBe(stream);
    expect(stream.isPaused()).toBe(true);
    expect(stream.listenerCount('data')).toBe(0);
  });

  it('a stream destroyed past the cap raises no unhandled error', async () => {
    const stream = feed(['0123456789'], false);
    const read = await readCapped(stream, 4, (s) => s.destroy(new Error('aborted on purpose')));
    expect(read.overflow).toBe(10);
    await new Promise((r) => setImmediate(r));
    expect(stream.destroyed).toBe(true);
  });

  it("the stream's own error rejects", async () => {
    const stream = feed(['ab'], false);
    const reading = readCapped(stream, 10, () => undefined);
    stream.destroy(new Error('connection reset'));
    await expect(reading).rejects.toThrow('connection reset');
  });
});
