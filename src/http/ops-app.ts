/**
 * The ops listener (docs/spec.md §1): /metrics, /-/liveness, /-/readiness (503 while draining),
 * /runs (this process's runs in flight, each with its workflow's followers), /-/openapi.json
 * (the OpenAPI description, openapi-route.ts). Like the main listener, every response carries
 * X-Request-Id and anything unmatched is a JSON 404.
 */
import express from 'express';
import { GatewayError } from '../core/errors';
import { collectAndMeasure, compactAndMeasure } from '../core/memory-snapshot';
import type { Metrics } from '../observability/metrics';
import type { RunInfo, RunRegistry } from '../run/registry';
import { serveOpenApi } from './openapi-route';
import { requestIdMiddleware } from './request-id';

export interface OpsContext {
  metrics: Metrics;
  registry: RunRegistry;
  isDraining(): boolean;
  /** Followers of a workflow on every replica (docs/spec.md §14); none when absent. */
  followersOf?(workflowId: string): number;
  /** What the process holds per session, link and run (/debug/structures, with --expose-gc only). */
  structures?(): Structures;
}

/**
 * What GET /debug/structures answers (src/gateway-structures.ts): `held`, the entries of each
 * per-session, per-link and per-run structure, each 0 once the process is idle; `pooled`,
 * what is kept across runs on purpose, bounded by its own rules.
 */
export interface Structures {
  held: Record<string, number>;
  pooled: Record<string, number>;
}

/** What /runs lists: this process's runs in flight, each with its workflow's followers. */
export function listRuns(ctx: Pick<OpsContext, 'registry' | 'followersOf'>): Array<RunInfo & { followers: number }> {
  return ctx.registry.list().map((run) => ({ ...run, followers: ctx.followersOf?.(run.workflow_id) ?? 0 }));
}

export function createOpsApp(ctx: OpsContext): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.use(requestIdMiddleware);
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
    res.json({ runs: listRuns(ctx) });
  });
  app.get('/-/openapi.json', serveOpenApi);
  // Benchmarks measure memory per run after a full GC (`?compact`: a compacting one, as on
  // a low-memory notification); only a process started with --expose-gc has one to offer,
  // so production processes never mount the route.
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc === 'function') {
    app.post('/debug/gc', (req, res, next) => {
      if (req.query['compact'] === undefined) res.json(collectAndMeasure(gc));
      else compactAndMeasure().then((snapshot) => res.json(snapshot), next);
    });
    // The leak tests and the soak (issue [26]): every per-session, per-link and per-run structure's entries.
    const { structures } = ctx;
    if (structures) app.get('/debug/structures', (_req, res) => void res.json(structures()));
  }
  app.use((req, res) => {
    res.status(404).json(new GatewayError('NOT_FOUND', `no route for ${req.method} ${req.path}`).toBody());
  });
  return app;
}
