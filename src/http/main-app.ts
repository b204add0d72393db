/**
 * The main listener's routes (SPEC §1). Every response carries X-Request-Id; anything
 * unmatched is a JSON 404.
 */
import express from 'express';
import { GatewayError } from '../errors';
import { sendError } from './error-response';
import { executeHandler, type ExecuteContext } from './execute-route';
import { createInternalRouter } from './internal-routes';
import { requestIdMiddleware } from './request-id';

export function createMainApp(ctx: ExecuteContext & { secret: Uint8Array }): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.use(requestIdMiddleware);
  // One log line per request (SPEC §7); the execute route writes its own, richer one.
  app.use((req, res, next) => {
    const started = performance.now();
    res.on('close', () => {
      if (res.locals['logged']) return;
      ctx.logger.info(
        {
          request_id: res.locals['requestId'],
          method: req.method,
          path: req.path,
          workflow_id: /\/workflows\/([^/]+)/.exec(req.path)?.[1],
          status: res.statusCode,
          duration_ms: Math.round(performance.now() - started),
        },
        'request',
      );
    });
    next();
  });
  app.post('/api/v4/ai/duo_workflows/workflows/:workflow_id/execute', executeHandler(ctx));
  app.use(
    '/internal',
    createInternalRouter({ secret: ctx.secret, backend: ctx.backend, logger: ctx.logger, stopKeyTtlMs: ctx.config.stopKeyTtlMs }),
  );
  app.use((req, res) => {
    sendError(res, new GatewayError('NOT_FOUND', `no route for ${req.method} ${req.path}`), ctx.logger);
  });
  return app;
}
