/**
 * The main listener's routes (docs/spec.md §1). Every response carries X-Request-Id; anything
 * unmatched is a JSON 404. The execute route logs its own line (with the run and the
 * reason); every other request gets the generic one.
 *
 * Execute requests as dispatchers send them skip express: its router, middleware chain
 * and response prototypes were about a tenth of the gateway's CPU per accepted execute
 * in bursts (BENCHMARKS.md, issue [18]), for a route whose one parameter a regular
 * expression reads. The same handler serves both ways; any other form of the target
 * (an encoded id, a trailing slash, another case) still goes through express's route.
 */
import type { RequestListener } from 'node:http';
import express from 'express';
import type { CoordinationBackend } from '../coordination/backend';
import { GatewayError } from '../core/errors';
import { sendError } from './error-response';
import { EXECUTE_PATH, execute, plainExecuteWorkflowId, type ExecuteRouteDeps } from './execute-route';
import { createInternalRouter } from './internal-routes';
import { assignRequestId, requestIdFrom, requestIdMiddleware } from './request-id';
import { originFormOnly } from './request-target';
import { correlation } from '../core/log';
import type { RequestRoute, Tracing } from '../observability/tracing';

export interface MainAppDeps extends ExecuteRouteDeps {
  /**
   * The other transports' plain-HTTP routes, mounted after the request log: the follow's
   * events (src/follow/route.ts) and the WebSocket route's answer to a GET without an
   * upgrade (src/websocket/route.ts). The gateway hands them in, so that http/ — the floor
   * those transports stand on — imports neither.
   */
  routes: express.RequestHandler[];
  secret: Uint8Array;
  backend: CoordinationBackend;
  stopKeyTtlMs: number;
  /** The sandbox's pages (GatewayOptions.sandboxRoutes); absent outside the sandbox. */
  sandboxRoutes?: express.RequestHandler;
}

export function createMainListener(deps: MainAppDeps): RequestListener {
  const app = createMainApp(deps);
  return (req, res) => {
    const workflowId = plainExecuteWorkflowId(req.method, req.url);
    if (workflowId === undefined) {
      app(req, res);
      return;
    }
    assignRequestId(req, res);
    void execute(deps, req, res, workflowId);
  };
}

/** The express app behind the main listener (exported for the test that holds docs/openapi.json to its routes). */
export function createMainApp(deps: MainAppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.use(requestIdMiddleware);
  app.use(originFormOnly(deps.logger));
  app.post(EXECUTE_PATH, (req, res) => void execute(deps, req, res, req.params['workflow_id']));
  // One log line per request (docs/spec.md §7) for everything after the execute route.
  app.use((req, res, next) => {
    const started = performance.now();
    res.on('close', () => {
      deps.logger.info(
        {
          ...correlation(requestIdFrom(res)),
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
  app.use('/internal', traceInternal(deps.tracing));
  for (const routes of deps.routes) app.use(routes);
  app.use('/internal', createInternalRouter({ secret: deps.secret, backend: deps.backend, logger: deps.logger, stopKeyTtlMs: deps.stopKeyTtlMs }));
  if (deps.sandboxRoutes) app.use(deps.sandboxRoutes);
  app.use((req, res) => {
    sendError(res, new GatewayError('NOT_FOUND', `no route for ${req.method} ${req.path}`), deps.logger);
  });
  return app;
}

/** The internal routes (docs/spec.md §1) by method and path under /internal. */
const INTERNAL_ROUTE = /^\/workflows\/([^/]+)\/(stop|run)\/?$/;

/**
 * The owner's calls to the internal routes as SERVER spans, children of the owner's
 * traceparent; anything else under /internal has none (it is refused like a bad token).
 */
function traceInternal(tracing: Tracing): express.RequestHandler {
  return (req, res, next) => {
    const match = tracing.enabled ? INTERNAL_ROUTE.exec(req.path) : null;
    const route: RequestRoute | undefined =
      match?.[2] === 'stop' && req.method === 'POST' ? 'internal_stop' : match?.[2] === 'run' && req.method === 'GET' ? 'internal_run' : undefined;
    if (route) {
      const span = tracing.request(route, req.headers, requestIdFrom(res) ?? '', decodeURIComponentSafe(match?.[1] ?? ''));
      res.on('close', () => tracing.requestEnded(span, { status: res.statusCode }));
    }
    next();
  };
}

function decodeURIComponentSafe(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
