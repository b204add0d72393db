/**
 * X-Request-Id (docs/spec.md §7): kept when it matches ^[A-Za-z0-9_-]{1,64}$, else replaced by a
 * generated one; echoed on every response of both listeners (errors and 404s included)
 * and passed to the owner (preauth, relay, segment-end) and the workflow service.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, type Dispatcher } from 'undici';
import { startStack, type Stack } from '../../stack';

const valid = /^[A-Za-z0-9_-]{1,64}$/;
let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
});

afterAll(async () => {
  await stack?.close();
});

function idOf(headers: Record<string, string | string[] | undefined>): string {
  const id = headers['x-request-id'];
  expect(typeof id, 'one X-Request-Id response header').toBe('string');
  return id as string;
}

describe('an invalid request id is replaced by a generated one, used everywhere', () => {
  const invalid: Array<[string, string | string[]]> = [
    ['65 characters', 'a'.repeat(65)],
    ['a space', 'has space'],
    ['a slash', 'a/b'],
    ['a dot', 'v1.2'],
    ['a semicolon', 'x;y'],
    ['empty', ''],
    ['two headers', ['first', 'second']],
  ];

  it.each(invalid)('%s', async (_what, sent) => {
    const workflowId = `rid-invalid-${Math.random().toString(36).slice(2, 10)}`;
    const res = await stack.executeText(workflowId, { headers: { 'x-request-id': sent as string } });
    expect(res.status).toBe(200);
    const id = idOf(res.headers);
    expect(id).toMatch(valid);
    expect(id).not.toBe(sent);
    expect(stack.owner.preauths.find((r) => r.path.includes(`/${workflowId}/`))?.headers['x-request-id']).toBe(id);
    expect(stack.workflow.callsFor(workflowId)[0]?.metadata['x-request-id']).toBe(id);
  });

  it('two requests without an id get different ones', async () => {
    const a = idOf((await stack.executeText('rid-none-1')).headers);
    const b = idOf((await stack.executeText('rid-none-2')).headers);
    expect(a).toMatch(valid);
    expect(b).toMatch(valid);
    expect(a).not.toBe(b);
  });

  it('a detached run carries the generated id on its relay and segment-end callback too', async () => {
    stack.owner.configure('rid-detached', { detached: true });
    const res = await stack.executeText('rid-detached', {
      headers: { 'x-request-id': 'not valid!' },
      steps: [{ op: 'checkpoint', text: 'x' }, { op: 'http', path: '/api/v4/projects/rid' }, { op: 'end' }],
    });
    expect(res.status).toBe(202);
    const id = idOf(res.headers);
    expect(id).toMatch(valid);
    await stack.owner.waitFor(() => stack.owner.segmentEndRequests.some((r) => r.path.includes('/rid-detached/')), 5_000, 'segment end');
    expect(stack.owner.apiRequests.find((r) => r.path === '/api/v4/projects/rid')?.headers['x-request-id']).toBe(id);
    expect(stack.owner.segmentEndRequests.find((r) => r.path.includes('/rid-detached/'))?.headers['x-request-id']).toBe(id);
    expect(stack.workflow.callsFor('rid-detached')[0]?.metadata['x-request-id']).toBe(id);
  });
});

describe('a valid request id is kept', () => {
  it('64 characters of [A-Za-z0-9_-]', async () => {
    const sent = `${'Ab9_-'.repeat(12)}xyzw`;
    expect(sent).toHaveLength(64);
    const res = await stack.executeText('rid-valid', { headers: { 'x-request-id': sent } });
    expect(res.status).toBe(200);
    expect(idOf(res.headers)).toBe(sent);
    expect(stack.owner.preauths.find((r) => r.path.includes('/rid-valid/'))?.headers['x-request-id']).toBe(sent);
    expect(stack.workflow.callsFor('rid-valid')[0]?.metadata['x-request-id']).toBe(sent);
  });
});

describe('every response carries it, errors and 404s included', () => {
  const post = { method: 'POST' as const };
  const cases: Array<[string, (id: string) => Promise<Dispatcher.ResponseData>, number]> = [
    ['main listener 404', (id) => request(`${stack.url}/nowhere`, { ...post, headers: { 'x-request-id': id } }), 404],
    ['GET on the execute route (404)', (id) => request(`${stack.url}/api/v4/ai/duo_workflows/workflows/1/execute`, { headers: { 'x-request-id': id } }), 404],
    ['400 undecodable body', (id) => stack.execute('rid-400', { rawBody: '{not json', headers: { 'x-request-id': id } }), 400],
    [
      'owner refusal passed through (401)',
      (id) => {
        stack.owner.configure('rid-denied', { deny: { status: 401, body: '{"message":"401 Unauthorized"}' } });
        return stack.execute('rid-denied', { headers: { 'x-request-id': id } });
      },
      401,
    ],
    [
      'malformed percent-encoding in the path (400)',
      (id) => request(`${stack.url}/api/v4/ai/duo_workflows/workflows/%E0%A4%A/execute`, { ...post, headers: { 'x-request-id': id } }),
      400,
    ],
    ['ops /metrics', (id) => request(`${stack.opsUrl}/metrics`, { headers: { 'x-request-id': id } }), 200],
    ['ops /-/liveness', (id) => request(`${stack.opsUrl}/-/liveness`, { headers: { 'x-request-id': id } }), 200],
    ['ops /runs', (id) => request(`${stack.opsUrl}/runs`, { headers: { 'x-request-id': id } }), 200],
    ['ops 404', (id) => request(`${stack.opsUrl}/nowhere`, { headers: { 'x-request-id': id } }), 404],
  ];

  it.each(cases)('%s', async (_what, send, status) => {
    const sent = `rid-${Math.random().toString(36).slice(2, 12)}`;
    const res = await send(sent);
    await res.body.dump();
    expect(res.statusCode).toBe(status);
    expect(idOf(res.headers)).toBe(sent);
    const generated = await send('bad id');
    await generated.body.dump();
    expect(generated.statusCode).toBe(status);
    expect(idOf(generated.headers)).toMatch(valid);
  });
});
