/**
 * Owner → longrun routes (docs/spec.md §1, §5, §6), each requiring
 * `Authorization: Bearer <HS256 JWT>` signed with the shared secret, iss "gitlab", whose
 * `workflow_id` claim is the path's workflow and whose life (exp − iat) is at most five
 * minutes (core/jwt.ts verifyOwnerJwt); anything else is a 401 without detail, so a
 * token for one workflow can never act on another.
 *
 *   POST /internal/workflows/:id/stop  202 when a run holds the workflow (on any replica),
 *                                      409 NOT_CANCELLABLE when none does (nothing is set)
 *   GET  /internal/workflows/:id/run   the run record, or 404
 */
import type { InFlightEntry, RunRecord } from '@longrun/client';
import express from 'express';
import { GatewayError } from '../core/errors';
import { correlation, type Logger } from '../core/log';
import type { CoordinationBackend, StoredRunRecord } from '../coordination/backend';
import { verifyOwnerJwt } from '../core/jwt';
import { sendError } from './error-response';
import { readBody } from './read-body';
import { requestIdFrom } from './request-id';
import { stopReasonOf } from './stop-request';

/** The largest stop body read (a reason is at most 64 characters). */
export const STOP_REQUEST_LIMIT = 4_096;

export interface InternalContext {
  secret: Uint8Array;
  backend: CoordinationBackend;
  logger: Logger;
  stopKeyTtlMs: number;
}

function storeError(err: unknown): GatewayError {
  return new GatewayError('LOCK_UNAVAILABLE', 'the coordination store is unavailable; retry shortly', { cause: err });
}

/** The run record as the route answers it (the client's RunRecord); `in_flight` (stored as JSON text) as a list. */
function runRecordBody(workflowId: string, record: StoredRunRecord): RunRecord {
  const { in_flight: inFlight, ...fields } = record;
  if (inFlight === undefined) return { workflow_id: workflowId, ...fields };
  let list: unknown = [];
  try {
    list = JSON.parse(inFlight);
  } catch {
    // Written by this code, so never; an unreadable value reads as unknown (empty).
  }
  return { workflow_id: workflowId, ...fields, in_flight: Array.isArray(list) ? (list as InFlightEntry[]) : [] };
}

export function createInternalRouter(ctx: InternalContext): express.Router {
  const router = express.Router();

  const unauthorized = (res: express.Response): void => void sendError(res, new GatewayError('UNAUTHORIZED', 'unauthorized'), ctx.logger);

  // Every route is under /workflows/:workflow_id; the token must be for that workflow.
  router.use('/workflows/:workflow_id', (req, res, next) => {
    const header = req.get('authorization') ?? '';
    const token = /^Bearer ([A-Za-z0-9_.-]+)$/.exec(header)?.[1];
    const workflowId = req.params['workflow_id'] as string;
    void (token ? verifyOwnerJwt(ctx.secret, token, workflowId) : Promise.resolve(false)).then((ok) => {
      if (ok) next();
      else unauthorized(res);
    });
  });

  router.post('/workflows/:workflow_id/stop', (req, res) => {
    const workflowId = req.params['workflow_id'] as string;
    void (async () => {
      // Optional body {"reason": "TOKEN"}: the user reason the run will send.
      const reason = stopReasonOf(await readBody(req, res, STOP_REQUEST_LIMIT));
      let requested: boolean;
      try {
        requested = await ctx.backend.requestStop(workflowId, reason, ctx.stopKeyTtlMs);
      } catch (err) {
        throw storeError(err);
      }
      if (!requested) throw new GatewayError('NOT_CANCELLABLE', 'no run of this workflow is in flight');
      ctx.logger.info({ workflow_id: workflowId, reason, ...correlation(requestIdFrom(res)) }, 'stop requested');
      res.status(202).json({ status: 'stop_requested', workflow_id: workflowId, reason });
    })().catch((err: unknown) => sendError(res, err, ctx.logger));
  });

  router.get('/workflows/:workflow_id/run', (req, res) => {
    const workflowId = req.params['workflow_id'] as string;
    ctx.backend.readRunRecord(workflowId).then(
      (record) => {
        if (record) res.json(runRecordBody(workflowId, record));
        else sendError(res, new GatewayError('NOT_FOUND', 'no run of this workflow is in flight'), ctx.logger);
      },
      (err: unknown) => sendError(res, storeError(err), ctx.logger),
    );
  });

  // Anything else under /internal says as little as a refused token.
  router.use((_req, res) => unauthorized(res));

  return router;
}
