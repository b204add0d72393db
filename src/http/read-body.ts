/**
 * Reads a request body up to `limit` bytes. Over the limit (declared or streamed) it
 * stops reading at once and rejects with INVALID_REQUEST; the connection is marked
 * `Connection: close` so the unread rest is never buffered.
 */
import type { Request, Response } from 'express';
import { GatewayError } from '../errors';

export const START_REQUEST_LIMIT = 4 * 1024 * 1024;

export function readBody(req: Request, res: Response, limit: number = START_REQUEST_LIMIT): Promise<Buffer> {
  const tooLarge = (): GatewayError => {
    res.setHeader('Connection', 'close');
    return new GatewayError('INVALID_REQUEST', `request body exceeds ${limit} bytes`);
  };
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge());
  if (req.readableEnded) return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(new GatewayError('INVALID_REQUEST', 'request body could not be read', { cause: err }));
    };
    const onAborted = (): void => {
      cleanup();
      reject(new GatewayError('CLIENT_GONE', 'the caller hung up while sending the body'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}
