/**
 * The simulated owner service (docs/spec.md §2, §6, §9) over real HTTP: preauth and its JWT check,
 * per-workflow answers (detached, deny, malformed, delay), the API endpoints relayed
 * actions hit, and the segment-end callback with its failure injection.
 */
import http from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request } from 'undici';
import { signJwt, OWNER_ISSUER, WORKHORSE_ISSUER } from '../../src/core/jwt';
import { OWNER_OAUTH_TOKEN, OwnerServiceSimulator, type SegmentEnd } from '../../sandbox/owner-sim';
import { testSecret, wrongSecret } from '../../stack/secret';

const WORKFLOW_URI = '127.0.0.1:50051';
const PREAUTH_CONTENT_TYPE = 'application/vnd.gitlab-workhorse+json';

let agent: Agent;

beforeAll(() => {
  // Own dispatcher, so no keep-alive socket outlives the file.
  agent = new Agent({ keepAliveTimeout: 10 });
});
afterAll(async () => {
  await agent.close();
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

async function call(url: string, options: { method?: 'GET' | 'POST' | 'PUT' | 'DELETE'; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  const res = await request(url, { method: options.method ?? 'GET', headers: options.headers, body: options.body, dispatcher: agent });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

function json(answer: Answer): Record<string, unknown> {
  return JSON.parse(answer.text) as Record<string, unknown>;
}

const executePath = (workflowId: string): string => `/api/v4/ai/duo_workflows/workflows/${workflowId}/execute`;
const segmentEndPath = (workflowId: string): string => `/api/v4/internal/ai/duo_workflows/workflows/${workflowId}/segment_end`;

describe('owner simulator: preauth', () => {
  let sim: OwnerServiceSimulator;
  let jwt: string;

  beforeAll(async () => {
    sim = await OwnerServiceSimulator.start({ secret: testSecret, workflowServiceUri: WORKFLOW_URI });
    jwt = await signJwt(testSecret, WORKHORSE_ISSUER);
  });
  afterAll(async () => {
    await sim.close();
  });

  const preauth = (workflowId: string, headers: Record<string, string> = {}, query = ''): Promise<Answer> =>
    call(`${sim.url}${executePath(workflowId)}${query}`, {
      method: 'POST',
      headers: { 'gitlab-workhorse-api-request': jwt, ...headers },
    });

  it('listens on a loopback port', () => {
    expect(sim.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it('answers 401 without the Gitlab-Workhorse-Api-Request header, and records the rejection', async () => {
    const before = sim.preauths.length;
    const res = await call(`${sim.url}${executePath('42')}`, { method: 'POST' });
    expect(res.status).toBe(401);
    expect(json(res)['message']).toMatch(/Gitlab-Workhorse-Api-Request/);
    expect(sim.preauths.length).toBe(before);
    expect(sim.rejectedJwt.at(-1)).toMatchObject({ method: 'POST', path: executePath('42') });
  });

  it.each([
    ['signed with the wrong secret', () => signJwt(wrongSecret, WORKHORSE_ISSUER)],
    ['issued by the owner instead of the gateway', () => signJwt(testSecret, OWNER_ISSUER)],
    ['not a JWT', () => Promise.resolve('not-a-jwt')],
  ])('answers 401 to a JWT %s', async (_label, token) => {
    const res = await preauth('42', { 'gitlab-workhorse-api-request': await token() });
    expect(res.status).toBe(401);
  });

  it('answers a valid preauth with the docs/spec.md §2 body', async () => {
    const res = await preauth('42');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(new RegExp(`^${PREAUTH_CONTENT_TYPE.replace(/[.+]/g, '\\$&')}`));
    const body = json(res);
    expect(body).toEqual({
      DuoWorkflow: {
        Service: { URI: WORKFLOW_URI, Headers: { 'x-gitlab-oauth-token': OWNER_OAUTH_TOKEN }, Secure: false },
        McpServers: {},
        LockConcurrentFlow: true,
        ServerCapabilities: ['owner_capability'],
        TimeoutHTTPRequests: true,
        WorkflowID: '42',
      },
    });
    expect(body).not.toHaveProperty('Detached');
  });

  it('records the preauth with its query string and headers, and no body', async () => {
    await preauth('77', { 'x-request-id': 'rid-1', 'private-token': 'user-token' }, '?detached=true&x=1');
    const received = sim.preauths.at(-1);
    expect(received).toMatchObject({ method: 'POST', path: `${executePath('77')}?detached=true&x=1`, body: '' });
    expect(received?.headers['x-request-id']).toBe('rid-1');
    expect(received?.headers['private-token']).toBe('user-token');
    expect(received?.headers['gitlab-workhorse-api-request']).toBe(jwt);
  });

  it('never reads detached mode from the caller: only configure() sets Detached', async () => {
    const res = await preauth('78', {}, '?detached=true');
    expect(json(res)).not.toHaveProperty('Detached');
  });

  it('answers per-workflow configuration', async () => {
    sim.configure('43', {
      detached: true,
      actorId: 'user-7',
      lockConcurrentFlow: false,
      timeoutHTTPRequests: false,
      serverCapabilities: ['a', 'b'],
      serviceHeaders: { 'x-gitlab-realm': 'saas' },
      serviceUri: '127.0.0.1:1234',
      mcpServers: { docs: { URL: 'http://127.0.0.1:9/mcp', Tools: ['search'], PreApprovedTools: [], Trusted: true } },
    });
    const body = json(await preauth('43'));
    expect(body).toEqual({
      DuoWorkflow: {
        Service: { URI: '127.0.0.1:1234', Headers: { 'x-gitlab-oauth-token': OWNER_OAUTH_TOKEN, 'x-gitlab-realm': 'saas' }, Secure: false },
        McpServers: { docs: { URL: 'http://127.0.0.1:9/mcp', Tools: ['search'], PreApprovedTools: [], Trusted: true } },
        LockConcurrentFlow: false,
        ServerCapabilities: ['a', 'b'],
        TimeoutHTTPRequests: false,
        WorkflowID: '43',
        ActorID: 'user-7',
      },
      Detached: true,
    });
  });

  it('sends Detached: false when configured so', async () => {
    sim.configure('44', { detached: false });
    expect(json(await preauth('44'))['Detached']).toBe(false);
  });

  it('passes a denial through with its status, body and content type', async () => {
    sim.configure('45', { deny: { status: 403, body: '{"message":"403 Forbidden"}' } });
    const res = await preauth('45');
    expect(res.status).toBe(403);
    expect(res.text).toBe('{"message":"403 Forbidden"}');
    expect(res.headers['content-type']).toMatch(/^application\/json/);

    sim.configure('46', { deny: { status: 404, body: 'not here', contentType: 'text/plain' } });
    const plain = await preauth('46');
    expect(plain.status).toBe(404);
    expect(plain.text).toBe('not here');
    expect(plain.headers['content-type']).toMatch(/^text\/plain/);
  });

  it('still checks the JWT before answering a denial', async () => {
    sim.configure('47', { deny: { status: 418, body: 'teapot' } });
    expect((await preauth('47', { 'gitlab-workhorse-api-request': 'bad' })).status).toBe(401);
  });

  it('malformed: content-type → a 200 with application/json', async () => {
    sim.configure('50', { malformed: 'content-type' });
    const res = await preauth('50');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(json(res)).toHaveProperty('DuoWorkflow.WorkflowID', '50');
  });

  it('malformed: json → a 200 of the preauth type whose body is not JSON', async () => {
    sim.configure('51', { malformed: 'json' });
    const res = await preauth('51');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/vnd\.gitlab-workhorse\+json/);
    expect(() => JSON.parse(res.text) as unknown).toThrow(SyntaxError);
  });

  it('malformed: missing-uri and missing-workflow-id drop those fields', async () => {
    sim.configure('52', { malformed: 'missing-uri' });
    const noUri = json(await preauth('52')) as { DuoWorkflow: { Service: Record<string, unknown>; WorkflowID?: string } };
    expect(noUri.DuoWorkflow.Service).not.toHaveProperty('URI');
    expect(noUri.DuoWorkflow.WorkflowID).toBe('52');

    sim.configure('53', { malformed: 'missing-workflow-id' });
    const noId = json(await preauth('53')) as { DuoWorkflow: { Service: Record<string, unknown> } };
    expect(noId.DuoWorkflow).not.toHaveProperty('WorkflowID');
    expect(noId.DuoWorkflow.Service['URI']).toBe(WORKFLOW_URI);
  });

  it('delays the answer by delayMs', async () => {
    sim.configure('54', { delayMs: 60 });
    const began = Date.now();
    const res = await preauth('54');
    expect(res.status).toBe(200);
    expect(Date.now() - began).toBeGreaterThanOrEqual(55);
  });

  it('a later configure() replaces the earlier one for that workflow', async () => {
    sim.configure('55', { deny: { status: 403, body: 'no' } });
    expect((await preauth('55')).status).toBe(403);
    sim.configure('55', { detached: true });
    const res = await preauth('55');
    expect(res.status).toBe(200);
    expect(json(res)['Detached']).toBe(true);
  });

  it('decodes a percent-encoded workflow id', async () => {
    const body = json(await preauth('a%2Fb')) as { DuoWorkflow: { WorkflowID: string } };
    expect(body.DuoWorkflow.WorkflowID).toBe('a/b');
  });

  it('waitFor resolves on a recorded request and rejects after its timeout', async () => {
    const count = sim.preauths.length;
    const seen = sim.waitFor(() => sim.preauths.length > count, 2_000, 'a preauth');
    await preauth('56');
    await seen;
    await expect(sim.waitFor(() => false, 20, 'nothing')).rejects.toThrow(/timed out after 20 ms waiting for nothing/);
  });
});

describe('owner simulator: defaults option', () => {
  let sim: OwnerServiceSimulator;

  beforeAll(async () => {
    sim = await OwnerServiceSimulator.start({
      secret: testSecret,
      workflowServiceUri: WORKFLOW_URI,
      defaults: { detached: true, actorId: 'everyone' },
      oauthToken: 'custom-token',
    });
  });
  afterAll(async () => {
    await sim.close();
  });

  it('applies the defaults to every workflow and merges configure() over them', async () => {
    const jwt = await signJwt(testSecret, WORKHORSE_ISSUER);
    const headers = { 'gitlab-workhorse-api-request': jwt };
    const plain = json(await call(`${sim.url}${executePath('1')}`, { method: 'POST', headers })) as {
      DuoWorkflow: { ActorID: string; Service: { Headers: Record<string, string> } };
      Detached: boolean;
    };
    expect(plain.Detached).toBe(true);
    expect(plain.DuoWorkflow.ActorID).toBe('everyone');
    expect(plain.DuoWorkflow.Service.Headers['x-gitlab-oauth-token']).toBe('custom-token');

    sim.configure('2', { detached: false });
    const merged = json(await call(`${sim.url}${executePath('2')}`, { method: 'POST', headers })) as { DuoWorkflow: { ActorID: string }; Detached: boolean };
    expect(merged.Detached).toBe(false);
    expect(merged.DuoWorkflow.ActorID).toBe('everyone');
  });
});

describe('owner simulator: API endpoints', () => {
  let sim: OwnerServiceSimulator;
  /** What Workhorse (and longrun's relay) sends, so Rails' require_gitlab_workhorse! passes. */
  let workhorse: Record<string, string>;

  beforeAll(async () => {
    sim = await OwnerServiceSimulator.start({ secret: testSecret, workflowServiceUri: WORKFLOW_URI });
    workhorse = { 'gitlab-workhorse': 'longrun-test', 'gitlab-workhorse-api-request': await signJwt(testSecret, WORKHORSE_ISSUER) };
  });
  afterAll(async () => {
    await sim.close();
  });

  const api = (path: string, options: { method?: 'GET' | 'POST' | 'PUT' | 'DELETE'; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> =>
    call(`${sim.url}${path}`, { ...options, headers: { ...workhorse, ...options.headers } });

  it('echo returns the method, path, body and headers, and records the request', async () => {
    const res = await api('/api/v4/echo?x=1', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer user-token' },
      body: '{"hello":"world"}',
    });
    expect(res.status).toBe(200);
    const body = json(res) as { method: string; path: string; body: string; headers: Record<string, string> };
    expect(body).toMatchObject({ method: 'POST', path: '/api/v4/echo?x=1', body: '{"hello":"world"}' });
    expect(body.headers['authorization']).toBe('Bearer user-token');
    expect(sim.apiRequests.at(-1)).toMatchObject({ method: 'POST', path: '/api/v4/echo?x=1', body: '{"hello":"world"}' });
  });

  it.each([
    ['no JWT and no Gitlab-Workhorse', async () => ({}), '403 Forbidden'],
    ['Gitlab-Workhorse without the JWT', async () => ({ 'gitlab-workhorse': 'longrun-test' }), '403 Forbidden'],
    [
      'a JWT signed with the wrong secret',
      async () => ({ 'gitlab-workhorse': 'longrun-test', 'gitlab-workhorse-api-request': await signJwt(wrongSecret, WORKHORSE_ISSUER) }),
      '403 Forbidden',
    ],
    [
      'a valid JWT without Gitlab-Workhorse',
      async () => ({ 'gitlab-workhorse-api-request': await signJwt(testSecret, WORKHORSE_ISSUER) }),
      '403 Forbidden - Request should be executed via GitLab Workhorse',
    ],
  ])('refuses an API call with %s (403, as Rails does), recording it apart', async (_label, headers, message) => {
    const accepted = sim.apiRequests.length;
    const refused = sim.rejectedApi.length;
    const res = await call(`${sim.url}/api/v4/projects/9`, { headers: await headers() });
    expect(res.status).toBe(403);
    expect(json(res)).toEqual({ message });
    expect(sim.apiRequests.length).toBe(accepted);
    expect(sim.rejectedApi.length).toBe(refused + 1);
    expect(sim.rejectedApi.at(-1)?.path).toBe('/api/v4/projects/9');
  });

  it('records the X-Forwarded-For it received and the connecting peer', async () => {
    await api('/api/v4/projects/9', { headers: { 'x-forwarded-for': '203.0.113.7, 10.0.0.2' } });
    expect(sim.apiRequests.at(-1)).toMatchObject({ forwardedFor: '203.0.113.7, 10.0.0.2', peer: '127.0.0.1' });
    await api('/api/v4/projects/9');
    expect(sim.apiRequests.at(-1)?.forwardedFor).toBeUndefined();
  });

  it('slow answers after ?ms', async () => {
    const began = Date.now();
    const res = await api('/api/v4/slow?ms=50');
    expect(res.status).toBe(200);
    expect(json(res)).toEqual({ slow: true, ms: 50 });
    expect(Date.now() - began).toBeGreaterThanOrEqual(45);
  });

  it('large answers ?bytes bytes', async () => {
    const res = await api('/api/v4/large?bytes=70000');
    expect(res.status).toBe(200);
    expect(res.text).toHaveLength(70_000);
    expect(res.text).toMatch(/^x+$/);
  });

  it('large defaults to 5 MiB, more than the relay may return', async () => {
    const res = await api('/api/v4/large');
    expect(Buffer.byteLength(res.text)).toBe(5 * 1024 * 1024);
  });

  it('redirect answers 302 with Location, which a client that does not follow redirects sees', async () => {
    const res = await api(`/api/v4/redirect?to=${encodeURIComponent('http://127.0.0.1:1/elsewhere')}`);
    expect(res.status).toBe(302);
    expect(res.headers['location']).toBe('http://127.0.0.1:1/elsewhere');
  });

  it('status answers the asked status code', async () => {
    const res = await api('/api/v4/status?code=503');
    expect(res.status).toBe(503);
    expect(json(res)).toEqual({ message: 'as asked' });
    expect((await api('/api/v4/status')).status).toBe(500);
  });

  it('reset resets the connection instead of answering', async () => {
    await expect(api('/api/v4/reset')).rejects.toMatchObject({ code: 'ECONNRESET' });
  });

  it("issues are paginated as GitLab's API paginates, with canonical-case headers on the wire", async () => {
    sim.issuesPerProject = 5;
    const raw = async (query: string): Promise<{ names: string[]; headers: Record<string, string>; body: unknown }> => {
      const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
        http.get(`${sim.url}/api/v4/projects/3/issues${query}`, { headers: workhorse, agent: false }, resolve).on('error', reject),
      );
      const chunks: Buffer[] = [];
      for await (const chunk of res) chunks.push(chunk as Buffer);
      const names = res.rawHeaders.filter((_, i) => i % 2 === 0);
      return { names, headers: Object.fromEntries(names.map((n) => [n, res.headers[n.toLowerCase()] as string])), body: JSON.parse(Buffer.concat(chunks).toString()) };
    };
    const first = await raw('?per_page=2');
    // Exact spelling on the wire: the relay must produce these names whatever the owner's case.
    expect(first.names).toEqual(expect.arrayContaining(['X-Next-Page', 'X-Total', 'X-Per-Page', 'X-Page', 'X-Total-Pages', 'X-Prev-Page', 'Link', 'Content-Type']));
    expect(first.headers).toMatchObject({ 'X-Page': '1', 'X-Per-Page': '2', 'X-Total': '5', 'X-Total-Pages': '3', 'X-Next-Page': '2', 'X-Prev-Page': '' });
    expect(first.body).toEqual([
      { id: 1000, iid: 1, project_id: '3', title: 'issue 1' },
      { id: 1001, iid: 2, project_id: '3', title: 'issue 2' },
    ]);
    const last = await raw('?page=3&per_page=2');
    expect(last.headers).toMatchObject({ 'X-Page': '3', 'X-Next-Page': '', 'X-Prev-Page': '2' });
    expect(last.body).toHaveLength(1);
    // GitLab's defaults: 20 a page.
    const all = await raw('');
    expect(all.headers).toMatchObject({ 'X-Per-Page': '20', 'X-Total-Pages': '1', 'X-Next-Page': '' });
    expect(all.body).toHaveLength(5);
    sim.issuesPerProject = 7;
  });

  it('headers answers every header shape a relay must handle', async () => {
    const res = await api('/api/v4/headers');
    expect(res.status).toBe(200);
    expect(res.text).toBe('{"shapes":true}');
    expect(res.headers).toMatchObject({
      'x-lower-case': 'kept',
      'x-multi': ['one', 'two'],
      'www-authenticate': ['Bearer realm="gitlab"', 'Basic realm="gitlab"'],
      'set-cookie': ['a=1; Path=/', 'b=2; Path=/'],
      connection: 'keep-alive, X-Hop-Secret',
      'x-hop-secret': 'for the next hop only',
      'keep-alive': 'timeout=5',
      'proxy-authenticate': 'Basic realm="proxy"',
      'transfer-encoding': 'chunked',
      trailer: 'X-Checksum',
    });
  });

  it('anything else is 404', async () => {
    const res = await api('/api/v4/nowhere', { method: 'DELETE' });
    expect(res.status).toBe(404);
    expect(sim.apiRequests.at(-1)).toMatchObject({ method: 'DELETE', path: '/api/v4/nowhere' });
  });
});

describe('owner simulator: segment-end callback', () => {
  let sim: OwnerServiceSimulator;
  let jwt: string;
  const end: SegmentEnd = { workflow_id: '42', run_id: 'run-1', reason: 'finished', segment_duration_s: 1.5, actions: 3 };

  beforeAll(async () => {
    sim = await OwnerServiceSimulator.start({ secret: testSecret, workflowServiceUri: WORKFLOW_URI });
    jwt = await signJwt(testSecret, WORKHORSE_ISSUER);
  });
  afterAll(async () => {
    await sim.close();
  });
  afterEach(() => {
    sim.segmentEnds.length = 0;
    sim.segmentEndFailures = { remaining: 0, status: 503 };
    sim.onSegmentEnd = undefined;
  });

  const post = (token: string | undefined, body: SegmentEnd = end): Promise<Answer> =>
    call(`${sim.url}${segmentEndPath(body.workflow_id)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token === undefined ? {} : { 'gitlab-workhorse-api-request': token }) },
      body: JSON.stringify(body),
    });

  it('requires the JWT', async () => {
    expect((await post(undefined)).status).toBe(401);
    expect((await post(await signJwt(wrongSecret, WORKHORSE_ISSUER))).status).toBe(401);
    expect(sim.segmentEnds).toEqual([]);
  });

  it('records the callback, answers 204 and calls onSegmentEnd', async () => {
    const seen: SegmentEnd[] = [];
    sim.onSegmentEnd = (e) => seen.push(e);
    const res = await post(jwt);
    expect(res.status).toBe(204);
    expect(sim.segmentEnds).toEqual([end]);
    expect(seen).toEqual([end]);
  });

  it('segmentEndFailures fails the next N callbacks with the given status, recording none of them', async () => {
    sim.segmentEndFailures = { remaining: 2, status: 503 };
    expect((await post(jwt)).status).toBe(503);
    expect((await post(jwt)).status).toBe(503);
    expect(sim.segmentEnds).toEqual([]);
    expect((await post(jwt)).status).toBe(204);
    expect(sim.segmentEnds).toEqual([end]);
    expect(sim.segmentEndFailures.remaining).toBe(0);
  });

  it('segmentEndFailures can inject 429', async () => {
    sim.segmentEndFailures = { remaining: 1, status: 429 };
    expect((await post(jwt)).status).toBe(429);
    expect((await post(jwt)).status).toBe(204);
  });

  it('a rejected JWT does not use up an injected failure', async () => {
    sim.segmentEndFailures = { remaining: 1, status: 500 };
    expect((await post('bad')).status).toBe(401);
    expect(sim.segmentEndFailures.remaining).toBe(1);
  });
});

describe('owner simulator: close', () => {
  it('is idempotent and ends a request in flight', async () => {
    const sim = await OwnerServiceSimulator.start({ secret: testSecret, workflowServiceUri: WORKFLOW_URI });
    const headers = { 'gitlab-workhorse': 'longrun-test', 'gitlab-workhorse-api-request': await signJwt(testSecret, WORKHORSE_ISSUER) };
    const inFlight = call(`${sim.url}/api/v4/slow?ms=10000`, { headers }).then(
      () => 'answered',
      () => 'failed',
    );
    await sim.waitFor(() => sim.apiRequests.length === 1, 2_000, 'the slow request');
    const began = Date.now();
    const first = sim.close();
    expect(sim.close()).toBe(first);
    await first;
    expect(await inFlight).toBe('failed');
    expect(Date.now() - began).toBeLessThan(1_000);
  });
});
