/**
 * The one place an error becomes an HTTP response: JSON body with the stable code,
 * Retry-After on every 503 (and 429/409 when the error carries one). An unexpected error
 * is logged with its detail and answered 500 INTERNAL without it.
 */
import type { Response } from 'express';
import { toGatewayError, type GatewayError } from '../errors';
import type { Logger } from '../log';

export function sendError(res: Response, err: unknown, logger: Logger): GatewayError {
  const error = toGatewayError(err);
  if (error.code === 'INTERNAL') logger.error({ err, request_id: res.locals['requestId'] }, 'internal error');
  if (res.headersSent) {
    res.end();
    return error;
  }
  if (error.retryAfterS !== undefined) res.setHeader('Retry-After', String(error.retryAfterS));
  res.status(error.status).json(error.toBody());
  return error;
}
