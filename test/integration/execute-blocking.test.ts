/**
 * Blocking-mode execute (docs/spec.md §2, §3, §3a, §4, §5, §6) against the simulators over real
 * sockets: a full turn, the status table, the lock, hang-ups and the relay's rules.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { lockKey } from '../../src/redis/keys';
import type { MemoryBackend } from '../../src/coordination/memory-backend';
import { OWNER_OAUTH_TOKEN } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { verifyJwt, WORKHORSE_ISSUER } from '../../src/core/jwt';
import { testSecret } from '../../stack/secret';
import { metricValue, ndjsonLines, startStack, type Stack } from '../../stack';

let stack: Stack | undefined;
const cleanups: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  // A stack started with `redis: 'own'` also closes its client and stops its redis-server.
  await stack?.close();
  stack = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

const blocking = { detached: false, lockConcurrentFlow: true };

describe('a full blocking turn', () => {
  it('streams checkpoints as ndjson, relays HTTP actions to the owner and refuses other actions', async () => {
    stack = await startStack({
      preauth: {
        ...blocking,
        serverCapabilities: ['job_trace_pagination', 'not_allowed', 'advanced_search'],
        mcpServers: { gitlab: { Tools: ['echo'], PreApprovedTools: ['echo'], Trusted: true } },
      },
    });
    const steps: Step[] = [
      { op: 'checkpoint', text: 'first' },
      { op: 'http', method: 'POST', path: '/api/v4/echo?x=1', body: '{"hello":"world"}' },
      { op: 'http', method: 'GET', path: '/api/v4/projects/7' },
      { op: 'unsupported', kind: 'runReadFile' },
      { op: 'unsupported', kind: 'runShellCommand' },
      { op: 'checkpoint', text: 'second', status: 'FINISHED' },
      { op: 'end' },
    ];
    const res = await stack.executeText('11', {
      headers: { 'x-request-id': 'req-blocking-1', authorization: 'Bearer caller-token' },
      body: {
        workflowID: '11',
        goal: 'do it',
        workflowMetadata: scenarioMetadata(steps),
        clientCapabilities: ['client_cap'],
        mcpTools: [{ name: 'client_tool' }],
        preapproved_tools: ['client_tool'],
        approval: { approval: { tool_name: 'search', tool_args_json: '{}' } },
        unknownField: 'dropped',
      },
    });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-ndjson');
    expect(res.headers['x-request-id']).toBe('req-blocking-1');
    const lines = ndjsonLines(res.text)
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ newCheckpoint: { status: 'RUNNING', checkpoint: 'first', goal: 'do it' } });
    expect(lines[1]).toMatchObject({ newCheckpoint: { status: 'FINISHED', checkpoint: 'second' } });

    const [call] = stack.workflow.callsFor('11');
    expect(call?.ended?.how).toBe('ok');
    // What the workflow service received: the authorized request, the owner's server
    // capabilities through Workhorse's allowlist (in its order) and its MCP tools (as its
    // gitlab server lists them) in place of the caller's.
    expect(call?.startRequest.workflowID).toBe('11');
    expect(call?.startRequest.clientCapabilities).toEqual(['advanced_search', 'job_trace_pagination']);
    expect(call?.startRequest.mcpTools).toMatchObject([{ name: 'gitlab_echo', trusted: true }]);
    expect(call?.startRequest.mcpTools).toHaveLength(1);
    expect(call?.startRequest.preapproved_tools).toEqual(['gitlab_echo']);
    expect(call?.startRequest.approval?.approval?.tool_name).toBe('search');
    expect(call?.metadata['x-gitlab-oauth-token']).toBe(OWNER_OAUTH_TOKEN);
    expect(call?.metadata['x-request-id']).toBe('req-blocking-1');

    const answers = call?.actionResponses ?? [];
    expect(answers.map((a) => a.kind)).toEqual(['runHTTPRequest', 'runHTTPRequest', 'runReadFile', 'runShellCommand']);
    const echo = answers[0]?.response.httpResponse;
    expect(echo?.statusCode).toBe(200);
    expect(JSON.parse(echo?.body ?? '{}')).toMatchObject({ method: 'POST', path: '/api/v4/echo?x=1', body: '{"hello":"world"}' });
    expect(answers[1]?.response.httpResponse?.statusCode).toBe(200);
    expect(JSON.parse(answers[1]?.response.httpResponse?.body ?? '{}')).toMatchObject({ id: 7, name: 'sandbox-project' });
    expect(answers[2]?.response.plainTextResponse?.error).toBe('action cannot be executed by this client: runReadFile');
    expect(answers[3]?.response.plainTextResponse?.error).toBe('action cannot be executed by this client: runShellCommand');

    // What the owner API received for the relayed call.
    const relayed = stack.owner.apiRequests.find((r) => r.path === '/api/v4/echo?x=1');
    expect(relayed?.headers['authorization']).toBe(`Bearer ${OWNER_OAUTH_TOKEN}`);
    expect(relayed?.headers['content-type']).toBe('application/json');
    expect(relayed?.headers['x-gitlab-duo-workflow-id']).toBe('11');
    expect(relayed?.headers['x-request-id']).toBe('req-blocking-1');
    // Workhorse's relay User-Agent; longrun's version travels in Gitlab-Workhorse.
    expect(relayed?.headers['user-agent']).toBe('Agent-Flow-via-GitLab-Workhorse');
    expect(relayed?.headers['gitlab-workhorse']).toMatch(/^longrun-/);
    expect(await verifyJwt(testSecret, String(relayed?.headers['gitlab-workhorse-api-request']), WORKHORSE_ISSUER)).toBe(true);

    // The preauth: same path and query, no body, the caller's headers, Gitlab-Workhorse and the JWT.
    const preauth = stack.owner.preauths[0];
    expect(preauth?.method).toBe('POST');
    expect(preauth?.path).toBe('/api/v4/ai/duo_workflows/workflows/11/execute');
    expect(preauth?.body).toBe('');
    expect(preauth?.headers['authorization']).toBe('Bearer caller-token');
    expect(preauth?.headers['content-type']).toBeUndefined();
    expect(preauth?.headers['gitlab-workhorse']).toMatch(/^longrun-/);

    const metrics = await stack.metrics();
    expect(metricValue(metrics, 'longrun_teardowns_total', { transport: 'http', reason: 'finished' })).toBe(1);
    expect(metricValue(metrics, 'longrun_http_relay_actions_total', { method: 'POST', status: '2xx' })).toBe(1);
    expect(metricValue(metrics, 'longrun_actions_total', { type: 'runReadFile' })).toBe(1);
  });

  it('forwards the query string to the owner and writes keepalive lines while the service is quiet', async () => {
    stack = await startStack({ preauth: blocking, env: { LONGRUN_KEEPALIVE_MS: '50' } });
    const res = await stack.executeText('12', { query: '?detached=true&x=y', steps: [{ op: 'wait', ms: 400 }, { op: 'checkpoint', text: 'late' }, { op: 'end' }] });
    expect(res.status).toBe(200);
    const lines = ndjsonLines(res.text);
    const firstCheckpoint = lines.findIndex((l) => l.includes('late'));
    expect(firstCheckpoint).toBeGreaterThanOrEqual(2);
    expect(lines.slice(0, firstCheckpoint).every((l) => l === '')).toBe(true);
    expect(stack.owner.preauths[0]?.path).toBe('/api/v4/ai/duo_workflows/workflows/12/execute?detached=true&x=y');
  });
});

describe('the status table, each row from its real cause', () => {
  it('400 INVALID_REQUEST: undecodable body, wrong field type, too large, workflowID mismatch — no stream opened', async () => {
    stack = await startStack({ preauth: blocking });
    const notJson = await stack.executeText('20', { rawBody: '{nope' });
    expect(notJson.status).toBe(400);
    expect(JSON.parse(notJson.text)).toEqual({ error: { code: 'INVALID_REQUEST', message: 'request body is not valid JSON', retryable: false } });
    const wrongType = await stack.executeText('20', { body: { goal: 42 } });
    expect(wrongType.status).toBe(400);
    expect(JSON.parse(wrongType.text).error.message).toContain('goal');
    const big = await stack.executeText('20', { rawBody: Buffer.alloc(5 * 1024 * 1024, 0x20) });
    expect(big.status).toBe(400);
    expect(JSON.parse(big.text).error.code).toBe('INVALID_REQUEST');
    const mismatch = await stack.executeText('20', { body: { workflowID: '21' } });
    expect(mismatch.status).toBe(400);
    expect(JSON.parse(mismatch.text).error.message).toContain('does not match');
    expect(stack.workflow.calls).toHaveLength(0);
    expect((stack.gateway.backend as MemoryBackend).holder('20')).toBeUndefined();
  });

  it('400 INVALID_REQUEST when the workflow service answers INVALID_ARGUMENT', async () => {
    stack = await startStack({ preauth: blocking });
    const res = await stack.executeText('22', { steps: [{ op: 'fail', code: 'INVALID_ARGUMENT', message: 'bad goal' }] });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text).error).toMatchObject({ code: 'INVALID_REQUEST', retryable: false });
  });

  it("PREAUTH_DENIED: the owner's status and body are passed through and no stream is opened", async () => {
    stack = await startStack({ preauth: blocking });
    stack.owner.configure('23', { deny: { status: 404, body: '{"message":"404 Not found"}' } });
    const res = await stack.executeText('23');
    expect(res.status).toBe(404);
    expect(res.text).toBe('{"message":"404 Not found"}');
    expect(res.headers['x-longrun-error-code']).toBe('PREAUTH_DENIED');
    stack.owner.configure('24', { deny: { status: 401, body: 'x'.repeat(40 * 1024), contentType: 'text/plain' } });
    const long = await stack.executeText('24');
    expect(long.status).toBe(401);
    expect(long.text.length).toBe(32 * 1024);
    expect(stack.workflow.calls).toHaveLength(0);
  });

  it("PREAUTH_DENIED: the owner's end-to-end headers reach the caller; hop-by-hop and framing headers do not", async () => {
    stack = await startStack({ preauth: blocking });
    stack.owner.configure('28', {
      deny: {
        status: 401,
        body: '{"message":"401 Unauthorized"}',
        headers: {
          'WWW-Authenticate': 'Bearer realm="gitlab", error="invalid_token"',
          'Retry-After': '30',
          Location: 'https://gitlab.example.com/users/sign_in',
          'Set-Cookie': ['a=1; Path=/', 'b=2; Path=/'],
          'X-Gitlab-Meta': 'kept',
          Connection: 'keep-alive, X-Hop-Secret',
          'X-Hop-Secret': 'for longrun only',
          'Proxy-Authenticate': 'Basic realm="proxy"',
          'X-Request-Id': 'owner-chose-this',
        },
      },
    });
    const res = await stack.executeText('28', { headers: { 'x-request-id': 'caller-rid-28' } });
    expect(res.status).toBe(401);
    expect(res.text).toBe('{"message":"401 Unauthorized"}');
    expect(res.headers).toMatchObject({
      'www-authenticate': 'Bearer realm="gitlab", error="invalid_token"',
      'retry-after': '30',
      location: 'https://gitlab.example.com/users/sign_in',
      'set-cookie': ['a=1; Path=/', 'b=2; Path=/'],
      'x-gitlab-meta': 'kept',
      'content-type': 'application/json; charset=utf-8',
      'content-length': String('{"message":"401 Unauthorized"}'.length),
      'x-longrun-error-code': 'PREAUTH_DENIED',
      // The caller's request id, which the owner was given, not a header the owner made up.
      'x-request-id': 'caller-rid-28',
    });
    expect(res.headers['x-hop-secret']).toBeUndefined();
    expect(res.headers['proxy-authenticate']).toBeUndefined();
    expect(stack.workflow.calls).toHaveLength(0);
  });

  it('403 USAGE_QUOTA_EXCEEDED when the service answers RESOURCE_EXHAUSTED with USAGE_QUOTA_EXCEEDED', async () => {
    stack = await startStack({ preauth: blocking });
    const res = await stack.executeText('25', { steps: [{ op: 'fail', code: 'RESOURCE_EXHAUSTED', message: 'USAGE_QUOTA_EXCEEDED: monthly quota' }] });
    expect(res.status).toBe(403);
    expect(JSON.parse(res.text).error.code).toBe('USAGE_QUOTA_EXCEEDED');
  });

  it('502 OWNER_UNAVAILABLE when the owner cannot be reached', async () => {
    stack = await startStack({ preauth: blocking });
    await stack.owner.close();
    const res = await stack.executeText('26');
    expect(res.status).toBe(502);
    expect(JSON.parse(res.text).error).toMatchObject({ code: 'OWNER_UNAVAILABLE', retryable: true });
  });

  it('502 OWNER_UNAVAILABLE when the preauth misses its deadline', async () => {
    stack = await startStack({ preauth: { ...blocking, delayMs: 1_000 }, env: { LONGRUN_PREAUTH_TIMEOUT_MS: '100' } });
    const res = await stack.executeText('27');
    expect(res.status).toBe(502);
    expect(JSON.parse(res.text).error.code).toBe('OWNER_UNAVAILABLE');
  });

  it('502 PREAUTH_INVALID for a malformed 200, and nothing is opened', async () => {
    stack = await startStack({ preauth: blocking });
    for (const [id, malformed] of [
      ['30', 'content-type'],
      ['31', 'json'],
      ['32', 'missing-uri'],
      ['33', 'missing-workflow-id'],
    ] as const) {
      stack.owner.configure(id, { ...blocking, malformed });
      const res = await stack.executeText(id);
      expect(res.status, malformed).toBe(502);
      expect(JSON.parse(res.text).error.code, malformed).toBe('PREAUTH_INVALID');
    }
    expect(stack.workflow.calls).toHaveLength(0);
  });

  it('502 WORKFLOW_SERVICE_UNAVAILABLE when the workflow service is down, and the lock is released', async () => {
    stack = await startStack({ preauth: { ...blocking, serviceUri: '127.0.0.1:1' } });
    const res = await stack.executeText('34');
    expect(res.status).toBe(502);
    expect(JSON.parse(res.text).error).toMatchObject({ code: 'WORKFLOW_SERVICE_UNAVAILABLE', retryable: true });
    expect((stack.gateway.backend as MemoryBackend).holder('34')).toBeUndefined();
  });

  it('503 DRAINING with Retry-After once the gateway drains', async () => {
    stack = await startStack({ preauth: blocking });
    const draining = stack.gateway.drain();
    const res = await stack.executeText('35').catch(() => undefined);
    // The listener may already be closed when the drain had nothing to wait for.
    if (res) {
      expect(res.status).toBe(503);
      expect(res.headers['retry-after']).toBe('1');
      expect(JSON.parse(res.text).error.code).toBe('DRAINING');
    }
    await draining;
  });

  it('a drain before the first line: 503 DRAINING with Retry-After (the turn did not finish), the stop sent, the lock released', async () => {
    stack = await startStack({ preauth: blocking });
    const s = stack;
    const pending = s.executeText('36', { steps: [{ op: 'wait', ms: 10_000 }, { op: 'end' }] });
    await s.workflow.waitFor(() => s.workflow.callsFor('36').length === 1, 5_000, 'the call');
    const draining = s.gateway.drain();
    const res = await pending;
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(JSON.parse(res.text).error).toMatchObject({ code: 'DRAINING', retryable: true });
    await draining;
    expect(s.workflow.callsFor('36')[0]?.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    expect((s.gateway.backend as MemoryBackend).holder('36')).toBeUndefined();
  });

  it('unknown routes are a JSON 404 with a request id', async () => {
    stack = await startStack({ preauth: blocking });
    const res = await stack.executeText('x', { query: '/../../nope' });
    expect(res.status).toBe(404);
    expect(res.headers['x-request-id']).toBeTruthy();
  });
});

describe('the lock (LockConcurrentFlow)', () => {
  it('two concurrent executes for one workflow: exactly one 200 stream and one 409', async () => {
    stack = await startStack({ redis: 'own', preauth: blocking });
    const steps: Step[] = [{ op: 'checkpoint', text: 'a' }, { op: 'wait', ms: 500 }, { op: 'end' }];
    const results = await Promise.all([stack.executeText('40', { steps }), stack.executeText('40', { steps })]);
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 409]);
    const conflict = results.find((r) => r.status === 409);
    expect(JSON.parse(conflict?.text ?? '{}').error.code).toBe('WORKFLOW_LOCKED');
    expect(stack.workflow.callsFor('40')).toHaveLength(1);
    expect(await stack.client!.exists(lockKey('40'))).toBe(0);
  });

  it('the caller hanging up cancels the stream and releases the lock', async () => {
    stack = await startStack({ redis: 'own', preauth: blocking });
    const abort = new AbortController();
    const res = await stack.execute('41', { steps: [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }], signal: abort.signal });
    expect(res.statusCode).toBe(200);
    expect(await stack.client!.exists(lockKey('41'))).toBe(1);
    abort.abort();
    await res.body.text().catch(() => undefined);
    await stack.workflow.waitFor(() => stack?.workflow.callsFor('41')[0]?.ended !== undefined, 5_000, 'call end');
    expect(stack.workflow.callsFor('41')[0]?.ended?.how).toBe('cancelled');
    await expect.poll(() => stack!.client!.exists(lockKey('41')), { timeout: 5_000 }).toBe(0);
    await expect.poll(async () => metricValue(await stack!.metrics(), 'longrun_teardowns_total', { transport: 'http', reason: 'client_gone' })).toBe(1);
  });

  it('Redis stopped: a blocking execute still runs without the lock, logged and counted', async () => {
    stack = await startStack({ redis: 'own', preauth: blocking });
    await stack.redis!.stop();
    const res = await stack.executeText('42');
    expect(res.status).toBe(200);
    expect(res.text).toContain('newCheckpoint');
    const metrics = await stack.metrics();
    expect(metricValue(metrics, 'longrun_unlocked_runs_total')).toBe(1);
    expect(metricValue(metrics, 'longrun_lock_operations_total', { op: 'acquire', result: 'error' })).toBe(1);
    expect(stack.logs()).toContain('continues without the lock');
  });

  it('without LockConcurrentFlow no lock is taken: two runs of one workflow both stream', async () => {
    stack = await startStack({ preauth: { detached: false, lockConcurrentFlow: false } });
    const steps: Step[] = [{ op: 'checkpoint', text: 'a' }, { op: 'wait', ms: 200 }, { op: 'end' }];
    const results = await Promise.all([stack.executeText('43', { steps }), stack.executeText('43', { steps })]);
    expect(results.map((r) => r.status)).toEqual([200, 200]);
  });
});

describe('the API relay (docs/spec.md §6)', () => {
  it('refuses paths that could leave the owner API, and never sends them anywhere', async () => {
    const trapHits: string[] = [];
    const trap = http.createServer((req, res) => {
      trapHits.push(req.url ?? '');
      res.end('trapped');
    });
    await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => trap.close(() => resolve())));
    const trapAddress = `127.0.0.1:${(trap.address() as AddressInfo).port}`;
    stack = await startStack({ preauth: blocking });
    const evil = [
      `http://${trapAddress}/steal`,
      `//${trapAddress}/steal`,
      `/\\${trapAddress}/steal`,
      `\\\\${trapAddress}\\steal`,
      '/api/v4/../../steal',
      '/api/v4/%2e%2e/%2e%2e/steal',
      '/api/v4/%252e%252e/steal',
      '/api/v4/..%2fsteal',
      'api/v4/projects/1',
      `/%2f${trapAddress}/steal`,
      '/api/v4/projects/1 HTTP/1.1\r\nHost: evil',
    ];
    const steps: Step[] = [...evil.map((path): Step => ({ op: 'http', path })), { op: 'http', path: `/api/v4/redirect?to=http://${trapAddress}/redirected` }, { op: 'end' }];
    const res = await stack.executeText('50', { steps });
    expect(res.status).toBe(200);
    const answers = stack.workflow.callsFor('50')[0]?.actionResponses ?? [];
    expect(answers).toHaveLength(evil.length + 1);
    for (const [i, answer] of answers.slice(0, evil.length).entries()) {
      expect(answer.response.httpResponse?.error, evil[i]).toMatch(/^invalid path: /);
      expect(answer.response.httpResponse?.statusCode ?? 0, evil[i]).toBe(0);
    }
    const redirect = answers[evil.length]?.response.httpResponse;
    expect(redirect?.statusCode).toBe(302);
    expect(redirect?.headers?.['Location']).toBe(`http://${trapAddress}/redirected`);
    expect(trapHits).toEqual([]);
    // Only the redirect endpoint reached the owner; none of the refused paths did.
    expect(stack.owner.apiRequests.map((r) => r.path)).toEqual([`/api/v4/redirect?to=http://${trapAddress}/redirected`]);
    expect(metricValue(await stack.metrics(), 'longrun_http_relay_errors_total', { type: 'refused_path' })).toBe(evil.length);
  });

  it('answers "request timed out" after the relay timeout when TimeoutHTTPRequests is set', async () => {
    stack = await startStack({ preauth: { ...blocking, timeoutHTTPRequests: true }, env: { LONGRUN_RELAY_TIMEOUT_MS: '200' } });
    const res = await stack.executeText('51', { steps: [{ op: 'http', path: '/api/v4/slow?ms=3000' }, { op: 'end' }] });
    expect(res.status).toBe(200);
    expect(stack.workflow.callsFor('51')[0]?.actionResponses[0]?.response.httpResponse?.error).toBe('request timed out');
  });

  it('caps the relayed body at 4 MiB − 4 KiB', async () => {
    stack = await startStack({ preauth: blocking });
    const limit = 4 * 1024 * 1024 - 4 * 1024;
    const res = await stack.executeText('52', {
      steps: [{ op: 'http', path: `/api/v4/large?bytes=${limit + 1}` }, { op: 'http', path: `/api/v4/large?bytes=${limit - 100}` }, { op: 'end' }],
    });
    expect(res.status).toBe(200);
    const answers = stack.workflow.callsFor('52')[0]?.actionResponses ?? [];
    expect(answers[0]?.response.httpResponse?.error).toBe(`response body exceeded size limit (${limit} bytes)`);
    expect(answers[0]?.response.httpResponse?.statusCode).toBe(200);
    expect(answers[0]?.response.httpResponse?.body?.length).toBe(limit);
    expect(answers[1]?.response.httpResponse?.error ?? '').toBe('');
    expect(answers[1]?.response.httpResponse?.body?.length).toBe(limit - 100);
  });

  it('passes the owner API status through (4xx/5xx are answers, not errors)', async () => {
    stack = await startStack({ preauth: blocking });
    await stack.executeText('53', { steps: [{ op: 'http', path: '/api/v4/status?code=503' }, { op: 'end' }] });
    expect(stack.workflow.callsFor('53')[0]?.actionResponses[0]?.response.httpResponse?.statusCode).toBe(503);
  });
});

describe('the channel pool', () => {
  it('spreads streams over connections so a per-connection stream cap does not queue runs', async () => {
    stack = await startStack({
      preauth: { detached: false, lockConcurrentFlow: false },
      workflow: { maxConcurrentStreams: 2 },
      env: { LONGRUN_GRPC_STREAMS_PER_CONNECTION: '2' },
    });
    const steps: Step[] = [{ op: 'checkpoint', text: 'a' }, { op: 'wait', ms: 600 }, { op: 'end' }];
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => stack!.executeText(String(60 + i), { steps })));
    expect(results.every((r) => r.status === 200)).toBe(true);
    // Every call started before the first one ended: none waited behind the cap.
    const firstEnd = Math.min(...stack.workflow.calls.map((c) => c.ended?.at ?? Infinity));
    expect(stack.workflow.calls).toHaveLength(10);
    expect(stack.workflow.calls.every((c) => c.startedAt < firstEnd)).toBe(true);
  });
});
