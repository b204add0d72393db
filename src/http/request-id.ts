/**
 * X-Request-Id (SPEC §7): kept when it matches ^[A-Za-z0-9_-]{1,64}$, else a new one;
 * echoed on every response and passed on to the owner and the workflow service.
 */
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

const valid = /^[A-Za-z0-9_-]{1,64}$/;

export function requestIdOf(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  return value !== undefined && valid.test(value) ? value : randomUUID();
}

export function requestIdMiddleware(req: Request, res: Response, next: NextFunction): void {
  const id = requestIdOf(req.headers['x-request-id']);
  res.locals['requestId'] = id;
  res.setHeader('X-Request-Id', id);
  next();
}

export function requestIdFrom(res: Response): string {
  return res.locals['requestId'] as string;
}
