/**
 * X-Request-Id (docs/spec.md §7): kept when it matches ^[A-Za-z0-9_-]{1,64}$, else a new one
 * (a UUID); echoed on every response — errors and 404s included, since it is chosen before
 * any route runs — and passed on to the owner (preauth, relay, segment-end callback) and to
 * the workflow service as gRPC metadata `x-request-id`.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** The id format we keep; anything else (too long, spaces, '/', a list) is replaced. */
const REQUEST_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** Where a response keeps its request's id (a symbol: no name a library could also use). */
const REQUEST_ID = Symbol('longrun.requestId');
type Tagged = ServerResponse & { [REQUEST_ID]?: string };

/** The caller's id when valid, else a fresh one. Two X-Request-Id headers are invalid. */
export function requestIdOf(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? (header.length === 1 ? header[0] : undefined) : header;
  return value !== undefined && REQUEST_ID_PATTERN.test(value) ? value : randomUUID();
}

/** Chooses the request's id and sets the response's X-Request-Id header; the first thing done with a request. */
export function assignRequestId(req: IncomingMessage, res: ServerResponse): string {
  const id = requestIdOf(req.headers['x-request-id']);
  (res as Tagged)[REQUEST_ID] = id;
  res.setHeader('X-Request-Id', id);
  return id;
}

/** assignRequestId for the express apps (the ops listener, and the main listener's other routes). */
export function requestIdMiddleware(req: IncomingMessage, res: ServerResponse, next: () => void): void {
  assignRequestId(req, res);
  next();
}

/** The request id chosen for this request (undefined for a response that never had one). */
export function requestIdFrom(res: ServerResponse): string | undefined {
  return (res as Tagged)[REQUEST_ID];
}
