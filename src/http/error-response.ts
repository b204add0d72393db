/**
 * The one place an error becomes an HTTP response: its status (error-status.ts), a JSON
 * body with the stable code, Retry-After on every 503 (and 429/409 when the error
 * carries one). An unexpected error
 * is logged with its detail and answered 500 INTERNAL without it.
 */
import type { ServerResponse } from 'node:http';
import { toGatewayError, type GatewayError } from '../core/errors';
import { correlation, type Logger } from '../core/log';
import { errorStatus, retryAfterOf } from './error-status';
import { sendJson } from './json-response';
import { requestIdFrom } from './request-id';

export function sendError(res: ServerResponse, err: unknown, logger: Logger): GatewayError {
  const error = toGatewayError(err);
  if (error.code === 'INTERNAL') logger.error({ err, ...correlation(requestIdFrom(res)) }, 'internal error');
  if (res.headersSent) {
    res.end();
    return error;
  }
  const retryAfterS = retryAfterOf(error.code, error.retryAfterS);
  if (retryAfterS !== undefined) res.setHeader('Retry-After', String(retryAfterS));
  sendJson(res, errorStatus[error.code], error.toBody());
  return error;
}
