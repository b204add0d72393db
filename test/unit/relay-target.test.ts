/**
 * Where relayed runHTTPRequests go (LONGRUN_RELAY_URL, docs/configuration.md): to the relay URL,
 * while preauths and segment-end callbacks stay on the owner URL; under the relative URL root
 * as Workhorse's applyRelativeURLRoot puts it; with Workhorse's User-Agent. And why beside
 * GitLab it is Workhorse's listener: the newest Rails takes a commit only as a body Workhorse
 * uploaded, so the workflow service's create_commit works through a Workhorse-like front
 * (sandbox/workhorse-front.ts) and is refused 400 when relayed straight to the owner
 * (sandbox/owner-sim.ts, as strict as Rails there). Real HTTP servers on loopback, a real gateway.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SignJWT } from 'jose';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { MULTIPART_FIELDS_HEADER, UPLOAD_JWT_SUFFIX } from '../../sandbox/body-upload';
import { OWNER_OAUTH_TOKEN, OwnerServiceSimulator } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { WorkhorseFront } from '../../sandbox/workhorse-front';
import { signJwt, verifyJwt, WORKHORSE_ISSUER } from '../../src/core/jwt';
import { userAgent, version } from '../../src/core/version';
import { RELAY_USER_AGENT, withRelativeRoot } from '../../src/owner/relay-target';
import type { HttpResponse } from '../../src/workflow/contract';
import { testSecret, wrongSecret } from '../../stack/secret';
import { startStack, type Stack } from '../../stack';

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function stackWith(options: Parameters<typeof startStack>[0]): Promise<Stack> {
  const stack = await startStack(options);
  closers.push(() => stack.close());
  return stack;
}

/** A plain HTTP server recording each request's method, path and headers, answering 200 `{"ok":true}`. */
async function recorder(): Promise<{ url: string; seen: Array<{ method: string; path: string; headers: http.IncomingHttpHeaders }> }> {
  const seen: Array<{ method: string; path: string; headers: http.IncomingHttpHeaders }> = [];
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

/** The httpResponses the workflow service got in a blocking turn of `steps`, in order. */
async function relayed(stack: Stack, workflowId: string, steps: Step[], headers: Record<string, string> = {}): Promise<HttpResponse[]> {
  const res = await stack.executeText(workflowId, { steps: [...steps, { op: 'end' }], headers });
  expect(res.status).toBe(200);
  return (stack.workflow.callsFor(workflowId)[0]?.actionResponses ?? []).map((a) => a.response.httpResponse ?? {});
}

const blocking = { detached: false, lockConcurrentFlow: false };
const commit = { branch: 'main', commit_message: 'Add notes\n\nWritten by the flow.', actions: [{ action: 'create', file_path: 'notes.md', content: '# Notes' }] };
const commitStep = (projectId: string, body: unknown = commit): Step => ({
  op: 'http',
  method: 'POST',
  path: `/api/v4/projects/${projectId}/repository/commits`,
  body: JSON.stringify(body),
});

describe("the relative URL root, as Workhorse's applyRelativeURLRoot", () => {
  it.each([
    ['', '/api/v4/projects/1', '/api/v4/projects/1'],
    ['/gitlab', '/api/v4/projects/1', '/gitlab/api/v4/projects/1'],
    ['/gitlab', '/gitlab/api/v4/projects/1', '/gitlab/api/v4/projects/1'],
    ['/gitlab', '/gitlab', '/gitlab'],
    ['/gitlab', '/gitlabx/api', '/gitlab/gitlabx/api'],
    ['/gitlab', '/api/v4/projects/1/issues?page=2', '/gitlab/api/v4/projects/1/issues?page=2'],
    ['/a/b', '/a/b/api', '/a/b/api'],
    ['/a/b', '/a/api', '/a/b/a/api'],
  ])('root %j, path %j → %j', (root, path, expected) => {
    expect(withRelativeRoot(root, path)).toBe(expected);
  });
});

describe('LONGRUN_RELAY_URL: relays there, preauth and callbacks to LONGRUN_OWNER_URL', () => {
  it('a detached run: its preauth and segment end reach the owner, its relays only the relay URL, with Workhorse’s User-Agent', async () => {
    const relayTarget = await OwnerServiceSimulator.start({ secret: testSecret, workflowServiceUri: '127.0.0.1:1' });
    closers.push(() => relayTarget.close());
    const stack = await stackWith({ preauth: { detached: true }, env: { LONGRUN_RELAY_URL: relayTarget.url } });
    const res = await stack.executeText('900', {
      steps: [{ op: 'checkpoint' }, { op: 'http', path: '/api/v4/projects/7' }, { op: 'http', method: 'POST', path: '/api/v4/echo', body: '{"a":1}' }, { op: 'end' }],
      headers: { 'x-forwarded-for': '203.0.113.9' },
    });
    expect(res.status).toBe(202);
    await stack.owner.waitFor(() => stack.owner.segmentEnds.length === 1, 5_000, 'the segment end');

    // The owner URL: the preauth and the callback, no relay.
    expect(stack.owner.preauths.map((r) => r.path)).toEqual(['/api/v4/ai/duo_workflows/workflows/900/execute']);
    expect(stack.owner.segmentEnds.map((e) => [e.workflow_id, e.reason])).toEqual([['900', 'finished']]);
    expect(stack.owner.segmentEndRequests[0]?.headers['user-agent']).toBe(userAgent);
    expect([...stack.owner.apiRequests, ...stack.owner.rejectedApi]).toEqual([]);
    // The relay URL: the relays, nothing else.
    expect(relayTarget.apiRequests.map((r) => [r.method, r.path])).toEqual([
      ['GET', '/api/v4/projects/7'],
      ['POST', '/api/v4/echo'],
    ]);
    expect([...relayTarget.preauths, ...relayTarget.segmentEndRequests, ...relayTarget.rejectedApi, ...relayTarget.rejectedJwt]).toEqual([]);
    for (const relay of relayTarget.apiRequests) {
      expect(relay.headers).toMatchObject({
        'user-agent': RELAY_USER_AGENT,
        'gitlab-workhorse': `longrun-${version}`,
        authorization: `Bearer ${OWNER_OAUTH_TOKEN}`,
        'x-gitlab-duo-workflow-id': '900',
      });
      expect(relay.forwardedFor).toBe('203.0.113.9, 127.0.0.1');
      expect(await verifyJwt(testSecret, String(relay.headers['gitlab-workhorse-api-request']), WORKHORSE_ISSUER)).toBe(true);
    }
    expect(stack.workflow.callsFor('900')[0]?.actionResponses.map((a) => a.response.httpResponse?.statusCode)).toEqual([200, 200]);
  });

  it("a relay URL that refuses connections: the error names the relay URL's address, and the owner still authorizes", async () => {
    const gone = await recorder();
    const port = new URL(gone.url).port;
    await closers.pop()?.();
    const stack = await stackWith({ preauth: blocking, env: { LONGRUN_RELAY_URL: gone.url } });
    const [answer] = await relayed(stack, '901', [{ op: 'http', path: '/api/v4/projects/1' }]);
    expect(answer?.error).toBe(`dial tcp 127.0.0.1:${port}: connect: connection refused`);
    expect(stack.owner.preauths).toHaveLength(1);
    expect(stack.owner.apiRequests).toEqual([]);
  });

  it('a relative URL root: relays get the relay URL’s root once, as Workhorse prepends it; preauth and callback the owner URL’s', async () => {
    const relays = await recorder();
    // The owner and the relay target under GitLab's relative URL root; a trailing "/" changes nothing.
    const rooted = await stackWithOwnerRoot('/gitlab', `${relays.url}/gitlab/`);
    const res = await rooted.executeText('902', {
      steps: [
        { op: 'checkpoint' },
        { op: 'http', path: '/api/v4/projects/1' },
        { op: 'http', path: '/gitlab/api/v4/projects/2' },
        { op: 'http', path: '/gitlab' },
        { op: 'http', path: '/gitlabx/api' },
        { op: 'http', path: '/api/v4/projects/3/issues?page=2&per_page=5' },
        { op: 'end' },
      ],
    });
    expect(res.status).toBe(202);
    await rooted.owner.waitFor(() => rooted.owner.segmentEnds.length === 1, 5_000, 'the segment end');
    expect(relays.seen.map((r) => r.path)).toEqual([
      '/gitlab/api/v4/projects/1',
      '/gitlab/api/v4/projects/2',
      '/gitlab',
      '/gitlab/gitlabx/api',
      '/gitlab/api/v4/projects/3/issues?page=2&per_page=5',
    ]);
    expect(relays.seen.every((r) => r.headers['user-agent'] === RELAY_USER_AGENT)).toBe(true);
    expect(rooted.owner.preauths.map((r) => r.path)).toEqual(['/gitlab/api/v4/ai/duo_workflows/workflows/902/execute']);
    expect(rooted.owner.segmentEndRequests.map((r) => r.path)).toEqual(['/gitlab/api/v4/internal/ai/duo_workflows/workflows/902/segment_end']);
  });

  it('a relay URL without a path: relays unprefixed, whatever the owner URL’s root', async () => {
    const relays = await recorder();
    const stack = await stackWithOwnerRoot('/gitlab', relays.url, blocking);
    await relayed(stack, '903', [{ op: 'http', path: '/api/v4/projects/1' }]);
    expect(relays.seen.map((r) => r.path)).toEqual(['/api/v4/projects/1']);
    expect(stack.owner.preauths.map((r) => r.path)).toEqual(['/gitlab/api/v4/ai/duo_workflows/workflows/903/execute']);
  });
});

/**
 * A stack whose LONGRUN_OWNER_URL carries `root` (the owner simulator's routes match the end
 * of the path, so it answers under any root) and relays to `relayUrl`.
 */
async function stackWithOwnerRoot(root: string, relayUrl: string, preauth = { detached: true }): Promise<Stack> {
  const probe = await stackWith({ preauth, env: { LONGRUN_RELAY_URL: relayUrl } });
  // The same stack's owner, named with the root: a second gateway on it.
  const peer = await probe.startReplica({
    env: { LONGRUN_OWNER_URL: `${probe.owner.url}${root}`, LONGRUN_RELAY_URL: relayUrl, LONGRUN_LISTEN: '127.0.0.1:0', LONGRUN_OPS_LISTEN: '127.0.0.1:0' },
  });
  const execute: Stack['execute'] = (id, opts = {}) =>
    request(`${peer.url}/api/v4/ai/duo_workflows/workflows/${id}/execute${opts.query ?? ''}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...opts.headers },
      body: JSON.stringify({ goal: 'g', workflowMetadata: scenarioMetadata(opts.steps ?? []) }),
    });
  return {
    ...probe,
    gateway: peer.gateway,
    url: peer.url,
    execute,
    async executeText(id, opts) {
      const res = await execute(id, opts);
      return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
    },
  };
}

describe("a commit relayed through Workhorse's router (the newest Rails takes only an uploaded body)", () => {
  it('through the Workhorse-like front: the body is uploaded, Rails makes the commit (201), the file is gone after', async () => {
    const stack = await stackWith({ preauth: blocking, workhorseFront: true });
    const front = stack.front as WorkhorseFront;
    const [made, read] = await relayed(stack, '910', [commitStep('5'), { op: 'http', path: '/api/v4/projects/5' }], { 'x-forwarded-for': '198.51.100.7' });
    expect(made?.statusCode).toBe(201);
    expect(made?.error ?? '').toBe('');
    const detail = JSON.parse(made?.body ?? '{}') as { id: string; title: string; message: string };
    expect(detail).toMatchObject({ title: 'Add notes', message: commit.commit_message });
    expect(detail.id).toMatch(/^[0-9a-f]{40}$/);
    expect(read?.statusCode).toBe(200);
    expect(stack.owner.commits).toMatchObject([{ projectId: '5', branch: 'main', commitMessage: commit.commit_message, actions: commit.actions }]);

    // The front routed the commit through its body uploader, the read through its proxy.
    expect(front.requests.map((r) => [r.route, r.method, r.path, r.status])).toEqual([
      ['body_upload', 'POST', '/api/v4/projects/5/repository/commits', 201],
      ['proxy', 'GET', '/api/v4/projects/5', 200],
    ]);
    const stored = front.requests[0]?.uploadPath as string;
    expect(stack.owner.commits[0]?.uploadedFrom).toBe(stored);
    // Removed once Rails has answered (Workhorse: when the request's context ends).
    await expect.poll(() => existsSync(stored)).toBe(false);

    // What Rails received: the authorize preauth, then the upload's fields instead of the JSON body.
    const [authorize, upload, get] = stack.owner.apiRequests;
    expect(authorize).toMatchObject({ method: 'POST', path: '/api/v4/projects/5/repository/commits/authorize', body: '' });
    expect(authorize?.headers['authorization']).toBe(`Bearer ${OWNER_OAUTH_TOKEN}`);
    expect(upload?.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(upload?.headers[MULTIPART_FIELDS_HEADER]).toEqual(expect.any(String));
    const form = new URLSearchParams(upload?.body);
    expect(form.get('file.path')).toBe(stored);
    expect(form.get('file.size')).toBe(String(Buffer.byteLength(JSON.stringify(commit))));
    expect(form.get(`file${UPLOAD_JWT_SUFFIX}`)).toEqual(expect.any(String));
    // Workhorse's proxy: its own version, the relay's User-Agent and X-Gitlab-Duo-Workflow-Id kept, its peer appended.
    for (const seen of [authorize, upload, get]) {
      expect(seen?.headers).toMatchObject({ 'gitlab-workhorse': 'v18.0.0-sim', 'user-agent': RELAY_USER_AGENT, 'x-gitlab-duo-workflow-id': '910' });
      expect(seen?.forwardedFor).toBe('198.51.100.7, 127.0.0.1, 127.0.0.1');
    }
  });

  it('straight to the owner (the relay URL left to LONGRUN_OWNER_URL): Rails refuses the JSON body, 400 file is missing', async () => {
    const stack = await stackWith({ preauth: blocking });
    const [refused] = await relayed(stack, '911', [commitStep('5')]);
    expect(refused?.statusCode).toBe(400);
    expect(JSON.parse(refused?.body ?? '{}')).toEqual({ error: 'file is missing' });
    expect(stack.owner.commits).toEqual([]);
  });

  it('through the front, an invalid commit is refused as Rails refuses it, and the uploaded file is still removed', async () => {
    const stack = await stackWith({ preauth: blocking, workhorseFront: true });
    const answers = await relayed(stack, '912', [commitStep('5', { ...commit, branch: '' }), commitStep('5', { ...commit, actions: [{ action: 'rename', file_path: 'a' }] })]);
    expect(answers.map((a) => [a.statusCode, JSON.parse(a.body ?? '{}')])).toEqual([
      [400, { message: '400 Bad request - branch is required' }],
      [400, { message: '400 Bad request - actions[0][action] must be one of: create, update, move, delete, chmod' }],
    ]);
    expect(stack.owner.commits).toEqual([]);
    const stored = (stack.front as WorkhorseFront).requests.map((r) => r.uploadPath as string);
    expect(stored).toHaveLength(2);
    await expect.poll(() => stored.filter((file) => existsSync(file))).toEqual([]);
  });
});

describe('the owner simulator’s commits endpoint and the front, as strict as their real peers', () => {
  async function ownerAndFront(root = ''): Promise<{ owner: OwnerServiceSimulator; front: WorkhorseFront; jwt: string }> {
    const owner = await OwnerServiceSimulator.start({ secret: testSecret, workflowServiceUri: '127.0.0.1:1' });
    closers.push(() => owner.close());
    const front = await WorkhorseFront.start({ upstream: owner.url, secret: testSecret, relativeUrlRoot: root });
    closers.push(() => front.close());
    return { owner, front, jwt: await signJwt(testSecret, WORKHORSE_ISSUER) };
  }

  const post = async (url: string, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> => {
    const res = await request(url, { method: 'POST', headers, body });
    return { status: res.statusCode, text: await res.body.text() };
  };
  const sign = (claims: Record<string, unknown>, secret: Uint8Array = testSecret): Promise<string> =>
    new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuer(WORKHORSE_ISSUER).setIssuedAt().sign(secret);

  it('refuses what only a forged upload would send: a plain file param, a foreign signature, a path outside its upload directory, no token', async () => {
    const { owner, jwt } = await ownerAndFront();
    const url = `${owner.url}/api/v4/projects/5/repository/commits`;
    const base = { 'gitlab-workhorse': 'x', 'gitlab-workhorse-api-request': jwt, authorization: `Bearer ${OWNER_OAUTH_TOKEN}` };
    const json = { ...base, 'content-type': 'application/json' };
    const formType = { ...base, 'content-type': 'application/x-www-form-urlencoded' };
    expect(await post(url, json, JSON.stringify({ ...commit, file: '/tmp/x' }))).toEqual({ status: 400, text: '{"error":"file is invalid"}' });

    const outside = await mkdtemp(path.join(os.tmpdir(), 'relay-target-outside-'));
    closers.push(() => rm(outside, { recursive: true, force: true }));
    const file = path.join(outside, 'body');
    await writeFile(file, JSON.stringify(commit));
    const form = async (filePath: string, secret: Uint8Array = testSecret): Promise<string> =>
      new URLSearchParams({ 'file.path': filePath, [`file${UPLOAD_JWT_SUFFIX}`]: await sign({ upload: { path: filePath, name: 'upload', size: '1' } }, secret) }).toString();
    const fields = async (filePath: string, secret: Uint8Array = testSecret): Promise<Record<string, string>> => ({
      ...formType,
      [MULTIPART_FIELDS_HEADER]: await sign({ rewritten_fields: { file: filePath } }, secret),
    });
    expect((await post(url, await fields(file, wrongSecret), await form(file))).status).toBe(500);
    expect((await post(url, await fields(file), await form(file, wrongSecret))).status).toBe(500);
    expect(await post(url, await fields(file), await form(file))).toEqual({ status: 400, text: `insecure path used '${file}'` });
    expect((await post(url, { ...(await fields(file)), authorization: 'Bearer someone-else' }, await form(file))).status).toBe(401);
    expect(owner.commits).toEqual([]);
  });

  it('the front deletes a Gitlab-Workhorse-Multipart-Fields header it did not make, and answers 404 outside its relative URL root', async () => {
    const { owner, front, jwt } = await ownerAndFront('/gitlab');
    const forged = await sign({ rewritten_fields: { file: '/etc/passwd' } });
    const headers = { 'gitlab-workhorse-api-request': jwt, [MULTIPART_FIELDS_HEADER]: forged, 'content-type': 'application/json' };
    // The owner simulator answers /gitlab/api/v4/echo as 404 (no such route), but it records what arrived.
    await post(`${front.url}/gitlab/api/v4/echo`, headers, '{}');
    expect(owner.apiRequests.at(-1)?.path).toBe('/gitlab/api/v4/echo');
    expect(owner.apiRequests.at(-1)?.headers[MULTIPART_FIELDS_HEADER]).toBeUndefined();
    expect(await post(`${front.url}/api/v4/echo`, headers, '{}')).toEqual({ status: 404, text: 'Not found "/api/v4/echo"\n' });
    expect(front.requests.map((r) => [r.route, r.path])).toEqual([
      ['proxy', '/gitlab/api/v4/echo'],
      ['not_found', '/api/v4/echo'],
    ]);
  });

  it('a refused authorize preauth (no user token) goes back as Rails answered it; nothing is stored', async () => {
    const { owner, front } = await ownerAndFront();
    const answer = await post(`${front.url}/api/v4/projects/5/repository/commits`, { 'content-type': 'application/json' }, JSON.stringify(commit));
    expect(answer).toEqual({ status: 401, text: '{"message":"401 Unauthorized"}' });
    expect(front.requests).toMatchObject([{ route: 'body_upload', status: 401 }]);
    expect(front.requests[0]?.uploadPath).toBeUndefined();
    expect(owner.apiRequests.map((r) => r.path)).toEqual(['/api/v4/projects/5/repository/commits/authorize']);
  });
});
