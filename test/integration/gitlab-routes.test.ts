/**
 * longrun beside a real GitLab takes none of its routes (docs/spec.md §1): of everything
 * GitLab serves under /api/v4/ai/duo_workflows/ (test/fixtures/gitlab-duo-workflows-routes.ts,
 * read from GitLab's own code), a gateway's main listener serves only what Workhorse itself
 * intercepts — the WebSocket upgrade at `ws` and `POST workflows/:id/execute` — and answers
 * every other method and path there with its own 404, asking the owner nothing; and each of
 * longrun's own public routes under that prefix is one of those two or a path GitLab does
 * not have. A route added to longrun on a path GitLab has fails the second test.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { WEBSOCKET_PREAUTH } from '../../sandbox/owner-sim';
import { FOLLOW_PATH } from '../../src/follow/route';
import { EXECUTE_PATH } from '../../src/http/execute-route';
import { WEBSOCKET_PATH } from '../../src/websocket/route';
import { PREFIX, gitlabDuoWorkflowsRoutes, readFrom, type GitLabRoute } from '../fixtures/gitlab-duo-workflows-routes';
import { startStack, type Stack } from '../../stack';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
const WORKFLOW = '42';
/** A concrete value for each path parameter: one segment each, as Grape matches them. */
const VALUES: Record<string, string> = { workflow_id: WORKFLOW, id: WORKFLOW, checkpoint_id: '7', event_id: '9' };

const concrete = (pattern: string): string => pattern.replace(/:([a-z_]+)/g, (_m, name: string) => VALUES[name] ?? '1');
/** A Grape path pattern as a regular expression over a request path (a parameter is one segment). */
const matcherOf = (pattern: string): RegExp => new RegExp(`^${pattern.replace(/[.]/g, '\\.').replace(/:[a-z_]+/g, '[^/]+')}$`);
/** The same route whatever its parameters are called. */
const shape = (pattern: string): string => pattern.replace(/:[a-z_]+/g, ':');

const intercepted = gitlabDuoWorkflowsRoutes.filter((route) => route.workhorse !== undefined);
const isIntercepted = (method: string, path: string): boolean => intercepted.some((route) => route.method === method && concrete(route.path) === path);

/** A GET with a WebSocket handshake: the status the listener answered with (101 when it upgraded). */
function upgradeStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
    });
    req.once('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.once('error', reject);
    req.end();
  });
}

describe('the fixture', () => {
  it('lists GitLab’s routes under the prefix, each with the file it comes from, and the two Workhorse intercepts', () => {
    for (const route of gitlabDuoWorkflowsRoutes) {
      expect(route.path.startsWith(PREFIX), route.path).toBe(true);
      expect(readFrom[route.file], route.file).toMatch(/^[\w.-]+\/[\w.-]+@[0-9a-f]{40}$/);
    }
    expect(intercepted.map((route) => `${route.method} ${shape(route.path)}`).sort()).toEqual([`GET ${PREFIX}ws`, `POST ${PREFIX}workflows/:/execute`]);
    // The routes the issue names, so the list cannot quietly shrink.
    const listed = new Set(gitlabDuoWorkflowsRoutes.map((route) => `${route.method} ${shape(route.path)}`));
    for (const route of [
      'POST direct_access',
      'GET list_tools',
      'GET ws',
      'POST workflows',
      'GET workflows/agent_privileges',
      'GET workflows/:',
      'PATCH workflows/:',
      'GET workflows/:/checkpoints',
      'POST workflows/:/checkpoints',
      'GET workflows/:/checkpoints/:',
      'POST workflows/:/checkpoint_writes_batch',
      'GET workflows/:/events',
      'POST workflows/:/events',
      'PUT workflows/:/events/:',
      'GET workflows/:/trace.jsonl',
      'POST workflows/:/execute',
      'POST workflows/:/resume',
      'POST workflows/:/restart',
    ]) {
      const [method, path] = route.split(' ') as [string, string];
      expect(listed.has(`${method} ${PREFIX}${path}`), route).toBe(true);
    }
  });
});

describe('a gateway beside GitLab', () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({ redis: 'none', env: { LONGRUN_LOG_LEVEL: 'warn' } });
    // The owner refuses: what reaches a longrun route is answered with the owner's 403, never a 404 of longrun's.
    const deny = { deny: { status: 403, body: '{"message":"403 Forbidden"}' } };
    stack.owner.configure(WORKFLOW, deny);
    stack.owner.configure(WEBSOCKET_PREAUTH, deny);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('serves only the two Workhorse intercepts among GitLab’s routes: every other method and path there is its own 404, and the owner is asked nothing for them', async () => {
    const paths = [...new Set(gitlabDuoWorkflowsRoutes.map((route) => concrete(route.path)))];
    const served: string[] = [];
    for (const path of paths) {
      for (const method of METHODS) {
        const res = await request(`${stack.url}${path}`, {
          method,
          headers: { accept: 'application/json', ...(method === 'GET' || method === 'DELETE' ? {} : { 'content-type': 'application/json' }) },
          ...(method === 'GET' || method === 'DELETE' ? {} : { body: '{}' }),
        });
        const text = await res.body.text();
        const notFound = res.statusCode === 404 && /"code":"NOT_FOUND"/.test(text);
        if (!notFound) served.push(`${method} ${path}`);
        if (!isIntercepted(method, path)) expect(notFound, `${method} ${path}: ${res.statusCode} ${text}`).toBe(true);
      }
      const upgrade = await upgradeStatus(`${stack.url}${path}`);
      if (upgrade !== 404) served.push(`UPGRADE ${path}`);
    }
    // What longrun took: the execute (the owner's 403 passed through) and the WebSocket route (a plain GET is its 400, an upgrade is preauthorized).
    expect(served.sort()).toEqual([`GET ${PREFIX}ws`, `POST ${PREFIX}workflows/${WORKFLOW}/execute`, `UPGRADE ${PREFIX}ws`]);
    expect(stack.owner.preauths.map((p) => `${p.method} ${p.path}`).sort()).toEqual([`GET ${PREFIX}ws`, `POST ${PREFIX}workflows/${WORKFLOW}/execute`]);
    expect(stack.owner.apiRequests).toEqual([]);
  });

  it('has, under the prefix, only Workhorse’s two routes and paths GitLab does not have — each of them served', async () => {
    const longrunRoutes: Array<Pick<GitLabRoute, 'method' | 'path'>> = [
      { method: 'POST', path: EXECUTE_PATH },
      { method: 'GET', path: WEBSOCKET_PATH },
      { method: 'GET', path: FOLLOW_PATH },
    ];
    for (const route of longrunRoutes) {
      expect(route.path.startsWith(PREFIX), route.path).toBe(true);
      const ofWorkhorse = intercepted.some((gitlab) => gitlab.method === route.method && shape(gitlab.path) === shape(route.path));
      const takenFromGitLab = gitlabDuoWorkflowsRoutes.filter((gitlab) => matcherOf(gitlab.path).test(concrete(route.path)));
      if (!ofWorkhorse) expect(takenFromGitLab, `${route.method} ${route.path} is a path GitLab has`).toEqual([]);
      // The listener does serve it: the owner's refusal, not longrun's 404.
      const res = await request(`${stack.url}${concrete(route.path)}`, { method: route.method, ...(route.method === 'POST' ? { body: '{}' } : {}) });
      const text = await res.body.text();
      expect(res.statusCode === 404 && /"code":"NOT_FOUND"/.test(text), `${route.method} ${route.path} is served`).toBe(false);
    }
  });
});
