/**
 * The ops listener (SPEC §1): /metrics, /-/liveness, /-/readiness (503 while draining),
 * /runs (this process's runs in flight).
 */
import express from 'express';
import type { Metrics } from '../metrics';
import type { RunRegistry } from '../run/registry';

export interface OpsContext {
  metrics: Metrics;
  registry: RunRegistry;
  isDraining(): boolean;
}

export function createOpsApp(ctx: OpsContext): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.get('/metrics', (_req, res) => {
    ctx.metrics.registry.metrics().then(
      (text) => res.type(ctx.metrics.registry.contentType).send(text),
      () => res.status(500).type('text/plain').send('metrics collection failed\n'),
    );
  });
  // Liveness stays 200 during a drain: the process is healthy, only leaving; a failing
  // liveness probe would get it SIGKILLed mid-drain.
  app.get('/-/liveness', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/-/readiness', (_req, res) => {
    if (ctx.isDraining()) res.status(503).json({ status: 'draining' });
    else res.json({ status: 'ok' });
  });
  app.get('/runs', (_req, res) => {
    res.json({ runs: ctx.registry.list() });
  });
  return app;
}
