/**
 * The owner's segment-end endpoint (docs/spec.md §6), as the reference dispatcher serves it:
 * longrun/client's Express middleware checks the gateway's JWT and parses the body (401 /
 * 400 otherwise, which the gateway does not retry); the dispatcher then acts on it, and
 * only then is the callback answered 204. When it could not act (its Redis is down) the
 * answer is 503, and the gateway tries again (3 attempts in all; after that the watchdog
 * recovers the turn).
 */
import express from 'express';
import { segmentEndMiddleware, segmentEndOf } from '@longrun/client/express';
import type { Dispatcher } from './dispatcher';

export const SEGMENT_END_PATH = '/api/v4/internal/ai/duo_workflows/workflows/:workflow_id/segment_end';

export function segmentEndRoute(dispatcher: Dispatcher, secret: Uint8Array): express.Router {
  const router = express.Router();
  router.post(SEGMENT_END_PATH, segmentEndMiddleware({ secret }), (_req, res) => {
    dispatcher.onSegmentEnd(segmentEndOf(res)).then(
      () => void res.status(204).end(),
      () => void res.status(503).json({ message: 'could not record the segment end; try again' }),
    );
  });
  return router;
}
