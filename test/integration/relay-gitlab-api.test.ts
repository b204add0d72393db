/**
 * The relays the workflow service makes most (its tools' GitLab API calls: project.py,
 * issue.py, merge_request.py, repository_files.py, commit.py in duo_workflow_service/tools)
 * against a Rails-like owner (sandbox/gitlab-api.ts: the user's token required, a file path
 * as one encoded segment, `ref` required, a commit's body checked). What the owner received
 * is what Rails requires and what Workhorse's runHTTPActionHandler sends (actions.go): the
 * method, path and query as the service wrote them, `Authorization: Bearer <the user's OAuth
 * token>`, `Content-Type: application/json`, `Gitlab-Workhorse` and a valid
 * `Gitlab-Workhorse-Api-Request` JWT, `X-Gitlab-Duo-Workflow-Id`, `X-Forwarded-For`; and the
 * service got the owner's answer back, status, body and headers — including what relays lose
 * by not passing Workhorse: a raw repository file, which Rails leaves to Workhorse's
 * senddata (Gitlab-Workhorse-Send-Data: git-blob), reaches the service with an empty body.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { OWNER_OAUTH_TOKEN } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import { request } from 'undici';
import { WORKHORSE_ISSUER, signJwt, verifyJwt } from '../../src/core/jwt';
import { testSecret } from '../../stack/secret';
import { startStack, type Stack } from '../../stack';

let stack: Stack | undefined;

afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const SHA = '6104942438c14ec7bd21c6cd5bd995272b3faff6';
const COMMIT_BODY = JSON.stringify({ branch: 'duo/fix', commit_message: 'Fix the greeting', actions: [{ action: 'update', file_path: 'src/app.rb', content: 'puts "hello"\n' }] });

/** Each tool's request, as the service writes it, and what the owner answers. */
const RELAYS: Array<{ tool: string; method: string; path: string; body?: string; status: number; answer: (body: string) => void; error?: RegExp }> = [
  { tool: 'get_project', method: 'GET', path: '/api/v4/projects/13', status: 200, answer: (b) => expect(JSON.parse(b)).toMatchObject({ id: 13, default_branch: 'main' }) },
  { tool: 'get_issue', method: 'GET', path: '/api/v4/projects/13/issues/9', status: 200, answer: (b) => expect(JSON.parse(b)).toMatchObject({ iid: 9, project_id: 13 }) },
  {
    tool: 'get_merge_request',
    method: 'GET',
    path: '/api/v4/projects/13/merge_requests/4',
    status: 200,
    answer: (b) => expect(JSON.parse(b)).toMatchObject({ iid: 4, target_branch: 'main' }),
  },
  // The file path is one URL-encoded segment (quote(file_path, safe="")): the relay keeps %2F as it is.
  // Rails leaves a raw file's content to Workhorse (Gitlab-Workhorse-Send-Data), which longrun does not complete: see below.
  {
    tool: 'get_repository_file',
    method: 'GET',
    path: '/api/v4/projects/13/repository/files/src%2Fapp.rb/raw?ref=main',
    status: 200,
    answer: (b) => expect(b).toBe(''),
    error: /^the owner answered with Gitlab-Workhorse-Send-Data \(git-blob\), a body only GitLab Workhorse can fill in/,
  },
  // commit.py's _get_file_content: the file as JSON, its content in Rails' own answer.
  {
    tool: 'create_commit (old_str/new_str: the file read first)',
    method: 'GET',
    path: '/api/v4/projects/13/repository/files/src%2Fapp.rb?ref=main',
    status: 200,
    answer: (b) => expect(Buffer.from((JSON.parse(b) as { content: string }).content, 'base64').toString()).toBe('puts "hello"\n'),
  },
  {
    tool: 'get_commit',
    method: 'GET',
    path: `/api/v4/projects/13/repository/commits/${SHA}?stats=true`,
    status: 200,
    answer: (b) => expect(JSON.parse(b)).toMatchObject({ id: SHA, short_id: SHA.slice(0, 8) }),
  },
];

describe('the relays the workflow service makes most, against a Rails-like owner', () => {
  it('reach the owner with the method, path, query and body the service wrote and the headers Rails requires; the answers come back whole', async () => {
    stack = await startStack({ preauth: { detached: false, lockConcurrentFlow: false }, env: { LONGRUN_LOG_LEVEL: 'warn' } });
    const steps: Step[] = [
      ...RELAYS.map((r): Step => ({ op: 'http', method: r.method, path: r.path, ...(r.body === undefined ? {} : { body: r.body }) })),
      { op: 'checkpoint', text: 'done', status: 'FINISHED' },
      { op: 'end' },
    ];
    const res = await stack.executeText('5401', { steps, headers: { 'x-forwarded-for': '203.0.113.7' } });
    expect(res.status).toBe(200);
    const received = stack.owner.apiRequests;
    expect(received.map((r) => `${r.method} ${r.path}`)).toEqual(RELAYS.map((r) => `${r.method} ${r.path}`));
    for (const [i, r] of received.entries()) {
      const relay = RELAYS[i] as (typeof RELAYS)[number];
      expect(r.headers['authorization'], relay.tool).toBe(`Bearer ${OWNER_OAUTH_TOKEN}`);
      expect(r.headers['content-type'], relay.tool).toBe('application/json');
      expect(r.headers['gitlab-workhorse'], relay.tool).toMatch(/^longrun-/);
      expect(await verifyJwt(testSecret, r.headers['gitlab-workhorse-api-request'] as string, WORKHORSE_ISSUER), relay.tool).toBe(true);
      expect(r.headers['x-gitlab-duo-workflow-id'], relay.tool).toBe('5401');
      // The caller's chain, then the caller's own address, as Workhorse appends it.
      expect(r.forwardedFor, relay.tool).toMatch(/^203\.0\.113\.7, (127\.0\.0\.1|::1|::ffff:127\.0\.0\.1)$/);
      expect(r.body, relay.tool).toBe(relay.body ?? '');
    }
    const [call] = stack.workflow.callsFor('5401');
    const answers = call?.actionResponses ?? [];
    expect(answers).toHaveLength(RELAYS.length);
    for (const [i, relay] of RELAYS.entries()) {
      const http = answers[i]?.response.httpResponse;
      expect(http?.statusCode, relay.tool).toBe(relay.status);
      if (relay.error) expect(http?.error, relay.tool).toMatch(relay.error);
      else expect(http?.error ?? '', relay.tool).toBe('');
      relay.answer(http?.body ?? '');
    }
    expect(answers[0]?.response.httpResponse?.headers?.['Content-Type']).toMatch(/^application\/json/);
    // What relays lose by not passing Workhorse: Rails' raw file answer is Workhorse's to complete
    // (senddata fetches the blob from Gitaly). Relayed past Workhorse it is the instruction in
    // Gitlab-Workhorse-Send-Data and an empty body: passed on with an error, so the tool does
    // not read an empty file as the file.
    const raw = answers[3]?.response.httpResponse;
    expect(raw?.headers?.['Content-Type']).toMatch(/^text\/plain/);
    expect(raw?.headers?.['Gitlab-Workhorse-Send-Data']).toMatch(/^git-blob:/);
    expect(raw?.body).toBe('');
  });

  it('create_commit through Workhorse (LONGRUN_RELAY_URL at a Workhorse-like front): Rails takes the uploaded body and makes the commit (201)', async () => {
    stack = await startStack({ workhorseFront: true, preauth: { detached: false, lockConcurrentFlow: false }, env: { LONGRUN_LOG_LEVEL: 'warn' } });
    const steps: Step[] = [
      { op: 'http', method: 'POST', path: '/api/v4/projects/13/repository/commits', body: COMMIT_BODY },
      { op: 'checkpoint', text: 'done', status: 'FINISHED' },
      { op: 'end' },
    ];
    expect((await stack.executeText('5403', { steps })).status).toBe(200);
    const http = stack.workflow.callsFor('5403')[0]?.actionResponses[0]?.response.httpResponse;
    expect(http?.statusCode).toBe(201);
    expect(http?.error ?? '').toBe('');
    expect(JSON.parse(http?.body ?? '{}')).toMatchObject({ title: 'Fix the greeting' });
    expect(stack.owner.commits.map((c) => ({ projectId: c.projectId, branch: c.branch, commitMessage: c.commitMessage }))).toEqual([
      { projectId: '13', branch: 'duo/fix', commitMessage: 'Fix the greeting' },
    ]);
  });

  it('Rails’ refusals come back as answers, not errors: a file path not encoded is another route (404), a file without ref is 400, a commit sent straight to Rails (not through Workhorse) is 400', async () => {
    stack = await startStack({ preauth: { detached: false, lockConcurrentFlow: false }, env: { LONGRUN_LOG_LEVEL: 'warn' } });
    const refused = [
      { path: '/api/v4/projects/13/repository/files/src/app.rb/raw?ref=main', status: 404 },
      { path: '/api/v4/projects/13/repository/files/README.md/raw', status: 400 },
      { path: '/api/v4/projects/13/repository/commits', method: 'POST', body: '{"branch":"b","commit_message":"m"}', status: 400 },
    ];
    const steps: Step[] = [
      ...refused.map((r): Step => ({ op: 'http', method: r.method ?? 'GET', path: r.path, ...(r.body ? { body: r.body } : {}) })),
      { op: 'checkpoint', text: 'done', status: 'FINISHED' },
      { op: 'end' },
    ];
    expect((await stack.executeText('5402', { steps })).status).toBe(200);
    const answers = stack.workflow.callsFor('5402')[0]?.actionResponses ?? [];
    expect(answers.map((a) => a.response.httpResponse?.statusCode)).toEqual(refused.map((r) => r.status));
    expect(answers.map((a) => a.response.httpResponse?.error ?? '')).toEqual(['', '', '']);
  });

  it('the owner’s API wants the user’s token: a request without it is Rails’ 401 (what a relay that lost the Bearer would get)', async () => {
    stack = await startStack({ env: { LONGRUN_LOG_LEVEL: 'warn' } });
    // Straight to the owner, with what a relay carries but the Authorization: the guard passes, the API refuses.
    const res = await request(`${stack.owner.url}/api/v4/projects/13/issues/9`, {
      headers: { 'gitlab-workhorse': 'longrun-test', 'gitlab-workhorse-api-request': await signJwt(testSecret, WORKHORSE_ISSUER) },
    });
    expect(res.statusCode).toBe(401);
    expect(await res.body.json()).toEqual({ message: '401 Unauthorized' });
  });
});
