/**
 * Reads a byte stream whole, up to a size cap: the body of a request or a response that
 * must not be buffered without bound. Past the cap it stops listening at once, keeps the
 * first `limit` bytes, and leaves the rest unread — `onOverflow` decides what becomes of
 * the stream (paused, so a response can still be written; or destroyed).
 */
import type { Readable } from 'node:stream';

export interface CappedRead {
  /** The bytes read: all of them, or the first `limit` when the cap was passed. */
  data: Buffer;
  /** The bytes seen when the cap was passed (more than `limit`); 0 when it was not. */
  overflow: number;
}

const ignore = (): void => undefined;

/** Resolves at the stream's end or once the cap is passed; rejects with the stream's error. */
export function readCapped(stream: Readable, limit: number, onOverflow: (stream: Readable) => void): Promise<CappedRead> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
    };
    const onData = (chunk: Buffer): void => {
      if (size + chunk.length > limit) {
        cleanup();
        chunks.push(chunk.subarray(0, limit - size));
        const overflow = size + chunk.length;
        // What becomes of the stream now is the caller's; an error it raises after (a destroy's abort) is not.
        stream.on('error', ignore);
        onOverflow(stream);
        resolve({ data: Buffer.concat(chunks), overflow });
        return;
      }
      size += chunk.length;
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve({ data: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size), overflow: 0 });
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    stream.on('data', onData);
    stream.once('end', onEnd);
    stream.once('error', onError);
  });
}
