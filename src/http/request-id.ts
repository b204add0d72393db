/**
 * X-Request-Id (docs/spec.md §7): kept when it matches ^[A-Za-z0-9_-]{1,64}$, else a new one
 * (a UUID); echoed on every response — errors and 404s included, since this middleware
 * runs first — and passed on to the owner (preauth, relay, segment-end callback) and to
 * the workflow service as gRPC metadata `x-request-id`.
 */
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

/** The id format we keep; anything else (too long, spaces, '/', a list) is replaced. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** The caller's id when valid, else a fresh one. Two X-Request-Id headers are invalid. */
export function requestIdOf(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? (header.length === 1 ? header[0] : undefined) : header;
  return value !== undefined && REQUEST_ID_PATTERN.test(value) ? value : randomUUID();
}

export function requestIdMiddleware(req: Request, res: Response, next: NextFunction): void {
  const id = requestIdOf(req.headers['x-request-id']);
  res.locals['requestId'] = id;
  res.setHeader('X-Request-Id', id);
  next();
}

/** The request id chosen for this request by requestIdMiddleware. */
export function requestIdFrom(res: Response): string {
  return res.locals['requestId'] as string;
}
