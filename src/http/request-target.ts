/**
 * The request target must be a path (RFC 9112 origin-form): preauth forwards the path
 * and query only (docs/spec.md §2), so an absolute-form target (`POST http://host/api/v4/...`)
 * or the asterisk-form (`OPTIONS *`) is refused with 400 before any route sees it, and
 * nothing is forwarded.
 */
import type { NextFunction, Request, Response } from 'express';
import { GatewayError } from '../core/errors';
import { correlation, type Logger } from '../core/log';
import { sendError } from './error-response';
import { requestIdFrom } from './request-id';

export function originFormOnly(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (req.url.startsWith('/')) {
      next();
      return;
    }
    res.setHeader('Connection', 'close');
    sendError(res, new GatewayError('INVALID_REQUEST', 'the request target must be a path: absolute-form and asterisk-form targets are refused'), logger);
    // The target itself is not logged: an absolute URL may carry credentials.
    logger.info({ ...correlation(requestIdFrom(res)), method: req.method, status: res.statusCode, reason: 'INVALID_REQUEST' }, 'request target refused');
  };
}
