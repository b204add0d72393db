/**
 * Reads a request body up to `limit` bytes. Over the limit (declared or streamed) it
 * stops reading at once and rejects with INVALID_REQUEST; the connection is marked
 * `Connection: close` so the unread rest is never buffered.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { GatewayError } from '../core/errors';
import { readCapped } from '../core/read-capped';

export const START_REQUEST_LIMIT = 4 * 1024 * 1024;

export function readBody(req: IncomingMessage, res: ServerResponse, limit: number = START_REQUEST_LIMIT): Promise<Buffer> {
  const tooLarge = (): GatewayError => {
    res.setHeader('Connection', 'close');
    return new GatewayError('INVALID_REQUEST', `request body exceeds ${limit} bytes`);
  };
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge());
  if (req.readableEnded) return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    const onAborted = (): void => reject(new GatewayError('CLIENT_GONE', 'the caller hung up while sending the body'));
    req.once('aborted', onAborted);
    // Past the limit reading stops at once (the stream is paused): the rest is never buffered.
    readCapped(req, limit, (body) => body.pause()).then(
      (read) => {
        req.off('aborted', onAborted);
        if (read.overflow) reject(tooLarge());
        else resolve(read.data);
      },
      (err: unknown) => {
        req.off('aborted', onAborted);
        reject(new GatewayError('INVALID_REQUEST', 'request body could not be read', { cause: err }));
      },
    );
  });
}
