/**
 * The main listener's routes (docs/spec.md §1). Every response carries X-Request-Id; anything
 * unmatched is a JSON 404. The execute route logs its own line (with the run and the
 * reason); every other request gets the generic one.
 */
import express from 'express';
import type { CoordinationBackend } from '../coordination/backend';
import { GatewayError } from '../errors';
import { sendError } from './error-response';
import { executeHandler, type ExecuteRouteDeps } from './execute-route';
import { createInternalRouter } from './internal-routes';
import { requestIdMiddleware } from './request-id';
import { originFormOnly } from './request-target';
import { WEBSOCKET_PATH } from './ws-route';

export interface MainAppDeps extends ExecuteRouteDeps {
  secret: Uint8Array;
  backend: CoordinationBackend;
  stopKeyTtlMs: number;
  /** The sandbox's pages (GatewayOptions.sandboxRoutes); absent outside the sandbox. */
  sandboxRoutes?: express.RequestHandler;
}

export function createMainApp(deps: MainAppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.use(requestIdMiddleware);
  app.use(originFormOnly(deps.logger));
  app.post('/api/v4/ai/duo_workflows/workflows/:workflow_id/execute', executeHandler(deps));
  // The WebSocket route answers upgrades only (ws-route.ts); a plain GET there is a client error.
  app.get(WEBSOCKET_PATH, (_req, res) => {
    sendError(res, new GatewayError('INVALID_REQUEST', 'this route takes a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket)'), deps.logger);
  });
  // One log line per request (docs/spec.md §7) for everything after the execute route.
  app.use((req, res, next) => {
    const started = performance.now();
    res.on('close', () => {
      deps.logger.info(
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
  app.use('/internal', createInternalRouter({ secret: deps.secret, backend: deps.backend, logger: deps.logger, stopKeyTtlMs: deps.stopKeyTtlMs }));
  if (deps.sandboxRoutes) app.use(deps.sandboxRoutes);
  app.use((req, res) => {
    sendError(res, new GatewayError('NOT_FOUND', `no route for ${req.method} ${req.path}`), deps.logger);
  });
  return app;
}
