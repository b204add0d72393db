/**
 * `@longrun/client/express`: an Express middleware for the owner's segment-end endpoint,
 * built on verifySegmentEnd(): a callback with a bad or missing JWT is answered 401 and one
 * with a bad body 400 (the gateway does not retry a 4xx); a good one is put on
 * `res.locals.segmentEnd` for the next handler, which must answer 2xx only once it has
 * acted (a 5xx makes the gateway try again, up to 3 times). Express is only a type import
 * here, and an optional peer of the package; the main entry does not load this file, so a
 * client without Express (or its types) compiles and runs.
 *
 *   app.post('/api/v4/internal/ai/duo_workflows/workflows/:workflow_id/segment_end',
 *     segmentEndMiddleware({ secret }), async (req, res) => { … segmentEndOf(res) … })
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { SegmentEndRejected, verifySegmentEnd, type SegmentEnd } from './segment-end';

export interface SegmentEndMiddlewareOptions {
  secret: Uint8Array;
  /** The oldest `iat` of the callback's token, in seconds (default 90, as Rails' verify_api_request!). */
  maxTokenAgeS?: number;
  /** Largest body read when no body parser ran before (default 64 KiB). */
  limitBytes?: number;
}

/** The verified callback body the middleware put on the response. */
export function segmentEndOf(res: Response): SegmentEnd {
  const end = res.locals['segmentEnd'] as SegmentEnd | undefined;
  if (!end) throw new Error('segmentEndOf(): segmentEndMiddleware did not run for this request');
  return end;
}

/** Reads the body whole, up to `limit` bytes; past it the rest stays unread (paused), so the 400 can still be answered. */
function rawBody(req: Request, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      stop();
      req.pause();
      // An error the paused request raises later (the client hanging up) is no longer ours.
      req.on('error', () => undefined);
      reject(new SegmentEndRejected(400, 'body too large'));
    };
    const onEnd = (): void => {
      stop();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (err: Error): void => {
      stop();
      reject(err);
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onError);
  });
}

export function segmentEndMiddleware(options: SegmentEndMiddlewareOptions): RequestHandler {
  const limit = options.limitBytes ?? 64 * 1024;
  return (req: Request, res: Response, next: NextFunction): void => {
    void (async () => {
      // A body parser may have run (text, raw, json); otherwise read the stream.
      const body: unknown = req.body !== undefined && !req.readable ? req.body : await rawBody(req, limit);
      const workflowId = typeof req.params?.['workflow_id'] === 'string' ? req.params['workflow_id'] : undefined;
      res.locals['segmentEnd'] = await verifySegmentEnd(
        options.secret,
        { headers: req.headers, body, workflowId },
        options.maxTokenAgeS === undefined ? {} : { maxAgeS: options.maxTokenAgeS },
      );
    })().then(
      () => next(),
      (err: unknown) => {
        if (err instanceof SegmentEndRejected) res.status(err.status).json({ message: err.message });
        else next(err);
      },
    );
  };
}
