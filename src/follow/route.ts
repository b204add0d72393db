/**
 * GET /api/v4/ai/duo_workflows/workflows/:workflow_id/follow (docs/spec.md §14): following a
 * workflow's runs as Server-Sent Events — the HTTP side of a follow. In order: the drain
 * (503 DRAINING), the position (Last-Event-ID, which EventSource sends when it reconnects,
 * over `?after=`; 400 when it is not an id), the caps (503 CAPACITY_EXHAUSTED with
 * Retry-After), the owner's preauthorization (a GET of this path and query, as the
 * WebSocket route asks it; a refusal is passed through), then the stream (hub.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import express from 'express';
import { GatewayError } from '../core/errors';
import type { Logger } from '../core/log';
import { passDenial } from '../http/denial-response';
import { sendError } from '../http/error-response';
import { requestIdFrom } from '../http/request-id';
import type { OwnerClient } from '../owner/owner-client';
import { parsePosition } from './events';
import type { Follow } from './hub';
import type { FollowSink } from './follower';

/** The route's path, as express matches it. */
export const FOLLOW_PATH = '/api/v4/ai/duo_workflows/workflows/:workflow_id/follow';

export interface FollowRouteDeps {
  follow: Follow;
  owner: OwnerClient;
  /** Throws DRAINING once the process drains. */
  checkServing(): void;
  logger: Logger;
}

/** The follow's route, for the main listener (src/http/main-app.ts `routes`). */
export function followRoutes(deps: FollowRouteDeps): express.Router {
  return express.Router().get(FOLLOW_PATH, (req, res) => void serve(deps, req, res, req.params['workflow_id'] as string));
}

/** Last-Event-ID when the client sends one (a reconnect), else `?after=`; undefined: from now. */
function positionOf(req: express.Request): number | undefined {
  const header = req.get('last-event-id')?.trim();
  const query = req.query['after'];
  const text = header || (typeof query === 'string' ? query : undefined);
  if (text === undefined || text === '') return undefined;
  const position = parsePosition(text);
  if (position === undefined) throw new GatewayError('INVALID_REQUEST', 'Last-Event-ID and ?after= take an event id (a non-negative integer)');
  return position;
}

async function serve(deps: FollowRouteDeps, req: express.Request, res: express.Response, workflowId: string): Promise<void> {
  const gone = new AbortController();
  res.on('close', () => gone.abort());
  let release: (() => void) | undefined;
  try {
    deps.checkServing();
    const after = positionOf(req);
    release = deps.follow.reserve(workflowId);
    const denial = await deps.owner.authorizeFollow(req.originalUrl, req.headers, requestIdFrom(res) as string, workflowId, gone.signal);
    if (denial) {
      release();
      passDenial(res, denial);
      return;
    }
    await deps.follow.open({ workflowId, after, signal: gone.signal, open: () => openStream(req, res) }, release);
  } catch (err) {
    release?.();
    if (!res.headersSent) sendError(res, gone.signal.aborted ? new GatewayError('CLIENT_GONE', 'the client hung up', { cause: err }) : err, deps.logger);
  }
}

/** The stream's head, written now (EventSource opens on it), and the response as the follower's sink. */
function openStream(req: IncomingMessage, res: ServerResponse): FollowSink {
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    // Neither a cache nor a proxy may hold events back (nginx buffers a response unless told).
    'Cache-Control': 'no-cache, no-transform',
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders();
  // Long-lived: the server's request timeout does not apply to a stream that is open.
  req.socket.setTimeout(0);
  return {
    write: (data) => void res.write(data),
    get buffered() {
      return res.writableLength;
    },
    drained: () =>
      new Promise<void>((resolve) => {
        if (!res.writableNeedDrain || res.destroyed) {
          resolve();
          return;
        }
        const done = (): void => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      }),
    end: () => void res.end(),
    destroy: () => void res.destroy(),
  };
}
