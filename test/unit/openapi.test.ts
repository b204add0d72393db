/**
 * docs/openapi.json (openapi/): committed as the generator makes it, served by the ops
 * listener, true to the routes both listeners serve and to the error catalog, and true to
 * what a real gateway answers — every body below is validated against the document's schema
 * for it (JSON Schema 2020-12, ajv).
 */
import { readFileSync } from 'node:fs';
import type express from 'express';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { opsServers } from '../../openapi/ops-paths';
import { openApiText } from '../../openapi/text';
import { errorCatalog, type ErrorCode } from '../../src/core/errors';
import { createLogger } from '../../src/core/log';
import { fromRoot } from '../../src/core/paths';
import { followRoutes, type FollowRouteDeps } from '../../src/follow/route';
import { errorStatus, retryAfterOf } from '../../src/http/error-status';
import { createMainApp, type MainAppDeps } from '../../src/http/main-app';
import { createOpsApp, type OpsContext } from '../../src/http/ops-app';
import { websocketHttpRoutes } from '../../src/websocket/route';
import { signOwnerJwt } from '../../src/core/jwt';
import { schemaValidator } from '../helpers/openapi-validator';
import { followPath, openSse } from '../helpers/sse';
import { startStack, type Stack } from '../../stack';
import { testSecret } from '../../stack/secret';

interface Operation {
  responses: Record<string, { headers?: Record<string, { description?: string; required?: boolean; schema?: { const?: string } }>; content?: Record<string, { schema: unknown }> }>;
}
type PathItem = Record<string, Operation> & { servers?: unknown };
interface Document {
  openapi: string;
  paths: Record<string, PathItem>;
  webhooks: Record<string, PathItem>;
  components: { schemas: Record<string, unknown> };
}

const committed = readFileSync(fromRoot('docs', 'openapi.json'), 'utf8');
const document = JSON.parse(committed) as Document;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

/** Every operation of the document's paths: `METHOD /path`, and whether it is the ops listener's. */
function documented(): Array<{ route: string; ops: boolean; operation: Operation }> {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((m) => ({ route: `${m.toUpperCase()} ${path}`, ops: item.servers !== undefined, operation: item[m] as Operation })),
  );
}

/** The routes an express app serves (`METHOD /path`, parameters as `{name}`), mounted routers included. */
function routesOf(app: express.Express): string[] {
  const routes: string[] = [];
  interface Layer {
    route?: { path: string; methods: Record<string, boolean> };
    handle: { stack?: Layer[] };
    rawPath?: string;
  }
  const walk = (stack: Layer[], prefix: string): void => {
    for (const layer of stack) {
      if (layer.route) {
        for (const method of Object.keys(layer.route.methods)) routes.push(`${method.toUpperCase()} ${prefix}${layer.route.path.replace(/:([A-Za-z_]+)/g, '{$1}')}`);
      } else if (layer.handle.stack) {
        walk(layer.handle.stack, prefix + (layer.rawPath && layer.rawPath !== '/' ? layer.rawPath : ''));
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack, '');
  return routes;
}

describe('docs/openapi.json', () => {
  it('is what the generator makes from the code (to regenerate it: npm run openapi)', () => {
    expect(committed === openApiText(), 'docs/openapi.json differs from what openapi/ generates: run `npm run openapi` and commit it').toBe(true);
  });

  it('is OpenAPI 3.1 in its own dialect: no schema names another ($schema, $id), every $ref resolves', () => {
    expect(document.openapi).toMatch(/^3\.1\.\d+$/);
    expect(committed).not.toMatch(/"\$schema"|"\$id"/);
    const refs = [...committed.matchAll(/"\$ref": "#\/([^"]+)"/g)].map((m) => m[1] as string);
    expect(refs.length).toBeGreaterThan(100);
    for (const ref of new Set(refs)) {
      const target = ref.split('/').reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], document);
      expect(target, ref).toBeDefined();
    }
  });

  it('gives every error code of the catalog with its status, and Retry-After where the catalog asks for one', () => {
    const operations = [
      ...documented().map((d) => d.operation),
      ...Object.values(document.webhooks).flatMap((item) => METHODS.filter((m) => item[m]).map((m) => item[m] as Operation)),
    ];
    for (const code of Object.keys(errorCatalog) as ErrorCode[]) {
      if (code === 'PREAUTH_DENIED') {
        // The owner's refusal keeps the owner's status: an operation's `default` answer, marked by its header.
        const denials = operations.filter((op) => op.responses['default']?.headers?.['X-Longrun-Error-Code']?.schema?.const === 'PREAUTH_DENIED');
        expect(denials.length, code).toBe(3);
        continue;
      }
      const status = String(errorStatus[code]);
      const answering = operations
        .map((op) => op.responses[status])
        .filter((response) => JSON.stringify(response?.content?.['application/json']?.schema ?? {}).includes(`"${code}"`));
      expect(answering.length, `${code} under ${status}`).toBeGreaterThan(0);
      const retryAfterS = retryAfterOf(code, undefined);
      for (const response of answering) {
        const header = response?.headers?.['Retry-After'];
        if (retryAfterS === undefined) continue;
        expect(header?.description, `${code}: Retry-After`).toContain(`${retryAfterS} for \`${code}\``);
      }
      // No response claims a code under another status.
      for (const op of operations) {
        for (const [other, response] of Object.entries(op.responses)) {
          if (other !== status && JSON.stringify(response.content?.['application/json']?.schema ?? {}).includes(`"${code}"`)) expect.fail(`${code} under ${other}`);
        }
      }
    }
  });

  it('has every route the main and ops listeners serve, and nothing they do not', () => {
    const logger = createLogger('silent');
    // gateway.ts hands the main listener these two routers (`routes`); the rest are main-app.ts's own.
    const mainApp = createMainApp({
      routes: [websocketHttpRoutes(logger), followRoutes({ logger } as FollowRouteDeps)],
      logger,
      tracing: { enabled: false },
    } as unknown as MainAppDeps);
    const opsApp = createOpsApp({} as OpsContext);
    // /debug/* is mounted only on request (--expose-gc, investigations): no route a caller uses.
    const served = [...routesOf(mainApp).map((r) => `main ${r}`), ...routesOf(opsApp).map((r) => `ops ${r}`)].filter((r) => !/ \/debug\//.test(r));
    expect(served.length).toBeGreaterThan(8);
    const inDocument = documented().map(({ route, ops }) => `${ops ? 'ops' : 'main'} ${route}`);
    expect([...inDocument].sort()).toEqual([...new Set(served)].sort());
    // The ops listener's paths, and only they, name it as their server.
    for (const [path, item] of Object.entries(document.paths)) if (item.servers !== undefined) expect(item.servers, path).toEqual(opsServers);
    expect(inDocument.filter((r) => r.startsWith('ops ')).length).toBe(5);
  });
});

describe('docs/openapi.json against a real gateway', () => {
  let stack: Stack;
  const validator = schemaValidator(document);
  const json = async (res: { body: { text(): Promise<string> } }): Promise<unknown> => JSON.parse(await res.body.text()) as unknown;

  beforeAll(async () => {
    stack = await startStack({ env: { LONGRUN_LOG_LEVEL: 'warn', LONGRUN_FOLLOW_IDLE_MS: '300' } });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('serves it on the ops listener at /-/openapi.json, byte for byte', async () => {
    const res = await request(`${stack.opsUrl}/-/openapi.json`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(await res.body.text()).toBe(committed);
  });

  it('serves every documented operation on the listener the document names (no fallback 404)', async () => {
    for (const { route, ops } of documented()) {
      const [method, path] = route.split(' ') as [string, string];
      const res = await request(`${ops ? stack.opsUrl : stack.url}${path.replace('{workflow_id}', 'w-routes')}`, { method, ...(method === 'POST' ? { body: '' } : {}) });
      const text = await res.body.text();
      expect(/no route for/.test(text), `${route}: ${res.statusCode} ${text.slice(0, 200)}`).toBe(false);
      expect(res.headers['x-request-id'], route).toBeTruthy();
    }
  });

  it('matches a blocking execute’s lines, a detached 202, the run record, a stop, the follow’s events, the segment-end body, errors and ops bodies', async () => {
    // Blocking: every non-empty ndjson line is a CheckpointLine.
    const blocking = await stack.executeText('w-blocking', { steps: [{ op: 'checkpoint', text: 'one' }, { op: 'checkpoint', text: 'two' }, { op: 'end' }] });
    expect(blocking.status).toBe(200);
    const lines = blocking.text.split('\n').filter((line) => line.trim() !== '');
    expect(lines.length).toBe(2);
    for (const line of lines) validator.expectValid('CheckpointLine', JSON.parse(line), 'ndjson line');

    // Detached, followed: the 202, the run record while it runs, the follow's events, the callback.
    const workflow = 'w-detached';
    stack.owner.configure(workflow, { detached: true });
    const follow = await openSse(`${stack.url}${followPath(workflow)}`);
    expect(follow.status).toBe(200);
    const accepted = await stack.execute(workflow, { steps: [{ op: 'checkpoint', text: 'one' }, { op: 'wait', ms: 400 }, { op: 'end' }] });
    expect(accepted.statusCode).toBe(202);
    validator.expectValid('Accepted', await json(accepted));
    const auth = { authorization: `Bearer ${await signOwnerJwt(testSecret, workflow)}` };
    const record = await request(`${stack.url}/internal/workflows/${workflow}/run`, { headers: auth });
    expect(record.statusCode).toBe(200);
    validator.expectValid('RunRecord', await json(record));
    await stack.owner.waitFor(() => stack.owner.segmentEndRequests.some((r) => r.path.includes(`/${workflow}/`)), 10_000, 'segment end');
    const callback = stack.owner.segmentEndRequests.find((r) => r.path.includes(`/${workflow}/`));
    validator.expectValid('SegmentEnd', JSON.parse(callback?.body ?? ''), 'segment-end body');
    await follow.waitFor((events) => events.some((e) => e.event === 'idle'), 10_000, 'idle');
    const kinds = follow.events.map((e) => e.event);
    expect(kinds).toEqual(expect.arrayContaining(['run', 'checkpoint', 'end', 'idle']));
    for (const event of follow.events) validator.expectValid(`Follow${event.event[0]?.toUpperCase()}${event.event.slice(1)}Data`, event.json, `follow ${event.event}`);

    // A stop with nothing in flight, and one refused for its body; a run record that is not there.
    const notCancellable = await request(`${stack.url}/internal/workflows/${workflow}/stop`, { method: 'POST', headers: auth, body: '{"reason":"USER_STOP"}' });
    expect(notCancellable.statusCode).toBe(409);
    validator.expectValid('ErrorBody', await json(notCancellable));
    const badReason = await request(`${stack.url}/internal/workflows/${workflow}/stop`, { method: 'POST', headers: auth, body: '{"reason":"lower"}' });
    expect(badReason.statusCode).toBe(400);
    validator.expectValid('ErrorBody', await json(badReason));
    const gone = await request(`${stack.url}/internal/workflows/${workflow}/run`, { headers: auth });
    expect(gone.statusCode).toBe(404);
    validator.expectValid('ErrorBody', await json(gone));

    // The ops bodies.
    validator.expectValid('Probe', await json(await request(`${stack.opsUrl}/-/liveness`)));
    validator.expectValid('Readiness', await json(await request(`${stack.opsUrl}/-/readiness`)));
    validator.expectValid('Runs', await json(await request(`${stack.opsUrl}/runs`)));
  });

  it('matches a stop accepted for a run in flight, and the runs the ops listener lists', async () => {
    const workflow = 'w-stop';
    stack.owner.configure(workflow, { detached: true });
    const accepted = await stack.execute(workflow, { steps: [{ op: 'checkpoint', text: 'one' }, { op: 'hang' }] });
    expect(accepted.statusCode).toBe(202);
    await accepted.body.dump();
    const runs = (await json(await request(`${stack.opsUrl}/runs`))) as { runs: unknown[] };
    expect(runs.runs.length).toBeGreaterThan(0);
    validator.expectValid('Runs', runs);
    const auth = { authorization: `Bearer ${await signOwnerJwt(testSecret, workflow)}` };
    const stop = await request(`${stack.url}/internal/workflows/${workflow}/stop`, { method: 'POST', headers: auth, body: '{"reason":"USER_STOP"}' });
    expect(stop.statusCode).toBe(202);
    validator.expectValid('StopRequested', await json(stop));
    await stack.owner.waitFor(() => stack.owner.segmentEnds.some((end) => end.workflow_id === workflow), 10_000, 'stopped run called back');
  });
});
