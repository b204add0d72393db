/**
 * The runHTTPRequest relay as the real peers see it (docs/spec.md §6): what a Rails-like owner
 * receives (the Workhorse headers its guard requires, X-Forwarded-For), and what the
 * workflow service gets back (Go-shaped header names it looks up case-sensitively, a
 * capped body with its status, network failures in the words its retry logic matches,
 * refused methods). Real simulators, real sockets; the owner simulator refuses with 403
 * whatever Rails would refuse.
 */
import dns from 'node:dns';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { version } from '../../src/core/version';
import { verifyJwt, WORKHORSE_ISSUER } from '../../src/core/jwt';
import { networkErrorText } from '../../src/owner/network-errors';
import { OWNER_OAUTH_TOKEN } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import type { HttpResponse } from '../../src/workflow/contract';
import { testSecret } from '../../stack/secret';
import { metricValue, startStack, type Stack } from '../../stack';

let stack: Stack | undefined;

afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const blocking = { detached: false, lockConcurrentFlow: false };

/** Runs `steps` in a blocking turn and returns the httpResponses the workflow service received, in order. */
async function relayed(workflowId: string, steps: Step[], headers: Record<string, string> = {}): Promise<HttpResponse[]> {
  if (!stack) throw new Error('no stack');
  const res = await stack.executeText(workflowId, { steps: [...steps, { op: 'end' }], headers });
  expect(res.status).toBe(200);
  const [call] = stack.workflow.callsFor(workflowId);
  return (call?.actionResponses ?? []).map((a) => a.response.httpResponse ?? {});
}

describe('what the owner receives', () => {
  it("carries Workhorse's relay headers: the owner's require_gitlab_workhorse! guard lets it through", async () => {
    stack = await startStack({ preauth: blocking });
    const [answer] = await relayed('300', [{ op: 'http', method: 'POST', path: '/api/v4/echo', body: '{"a":1}' }], {
      'x-request-id': 'relay-headers-1',
      'x-forwarded-for': '203.0.113.9, 198.51.100.20',
    });
    expect(answer?.statusCode).toBe(200);
    expect(stack.owner.rejectedApi).toEqual([]);
    const received = stack.owner.apiRequests.find((r) => r.path === '/api/v4/echo');
    expect(received?.headers).toMatchObject({
      'gitlab-workhorse': `longrun-${version}`,
      authorization: `Bearer ${OWNER_OAUTH_TOKEN}`,
      'content-type': 'application/json',
      'x-gitlab-duo-workflow-id': '300',
      'x-request-id': 'relay-headers-1',
      'user-agent': 'Agent-Flow-via-GitLab-Workhorse',
    });
    expect(await verifyJwt(testSecret, String(received?.headers['gitlab-workhorse-api-request']), WORKHORSE_ISSUER)).toBe(true);
    // The caller's chain, then the caller's own address (the test client on loopback).
    expect(received?.forwardedFor).toBe('203.0.113.9, 198.51.100.20, 127.0.0.1');
    expect(received?.peer).toBe('127.0.0.1');
  });

  it('X-Forwarded-For is the caller address alone when the caller sent none, on every relayed call of the run', async () => {
    stack = await startStack({ preauth: { detached: true } });
    const res = await stack.executeText('301', {
      steps: [{ op: 'checkpoint' }, { op: 'http', path: '/api/v4/projects/1' }, { op: 'wait', ms: 50 }, { op: 'http', path: '/api/v4/projects/2' }, { op: 'end' }],
    });
    expect(res.status).toBe(202);
    // Detached: the relays happen after the caller has gone; the address travelled with the run.
    await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 1, 5_000, 'segment end');
    expect(stack.owner.apiRequests.map((r) => [r.path, r.forwardedFor])).toEqual([
      ['/api/v4/projects/1', '127.0.0.1'],
      ['/api/v4/projects/2', '127.0.0.1'],
    ]);
  });
});

describe('what the workflow service gets back', () => {
  it('header names as Go writes them, repeated values joined with ", ", hop-by-hop headers gone', async () => {
    stack = await startStack({ preauth: blocking });
    const [answer] = await relayed('310', [{ op: 'http', path: '/api/v4/headers' }]);
    expect(answer?.statusCode).toBe(200);
    expect(answer?.body).toBe('{"shapes":true}');
    const headers = answer?.headers ?? {};
    expect(headers).toMatchObject({
      'Content-Type': 'application/json',
      'X-Lower-Case': 'kept',
      'X-Multi': 'one, two',
      'Www-Authenticate': 'Bearer realm="gitlab", Basic realm="gitlab"',
      'Set-Cookie': 'a=1; Path=/, b=2; Path=/',
    });
    expect(Object.keys(headers).filter((name) => /^(connection|keep-alive|transfer-encoding|trailer|upgrade|te|proxy-.*|x-hop-secret)$/i.test(name))).toEqual([]);
    // Every name is in canonical form.
    for (const name of Object.keys(headers)) expect(name, name).toMatch(/^[A-Z0-9][a-z0-9]*(-[A-Z0-9][a-z0-9]*)*$/);
  });

  it('a service paginating by headers["X-Next-Page"] reads every page', async () => {
    stack = await startStack({ preauth: blocking });
    stack.owner.issuesPerProject = 7;
    const answers = await relayed('311', [{ op: 'paginate', path: '/api/v4/projects/5/issues', perPage: 2 }]);
    const [pagination] = stack.workflow.callsFor('311')[0]?.paginations ?? [];
    expect(pagination).toEqual({ path: '/api/v4/projects/5/issues', pages: [1, 2, 3, 4], items: 7, end: 'last_page' });
    expect(answers.map((a) => a.headers?.['X-Next-Page'])).toEqual(['2', '3', '4', '']);
    expect(answers.every((a) => a.headers?.['X-Total'] === '7' && a.headers['X-Per-Page'] === '2')).toBe(true);
    expect(stack.owner.apiRequests.map((r) => r.path)).toEqual([1, 2, 3, 4].map((p) => `/api/v4/projects/5/issues?page=${p}&per_page=2`));
  });

  it('a body over 4 MiB − 4 KiB keeps its status, headers and the body up to the cap, with the error', async () => {
    stack = await startStack({ preauth: blocking });
    const limit = 4 * 1024 * 1024 - 4 * 1024;
    const [over] = await relayed('312', [{ op: 'http', path: `/api/v4/large?bytes=${limit + 10_000}` }]);
    expect(over?.error).toBe(`response body exceeded size limit (${limit} bytes)`);
    expect(over?.statusCode).toBe(200);
    expect(over?.headers?.['Content-Type']).toMatch(/^text\/plain/);
    expect(over?.body?.length).toBe(limit);
    expect(metricValue(await stack.metrics(), 'longrun_http_relay_errors_total', { type: 'too_large' })).toBe(1);
  });

  it('network failures keep the words the service matches: connection refused, connection reset', async () => {
    stack = await startStack({ preauth: blocking });
    // A reset: the owner drops the connection with RST instead of answering.
    const [reset] = await relayed('313', [{ op: 'http', path: '/api/v4/reset' }]);
    expect(reset?.error).toMatch(/connection reset by peer/);
    expect(reset?.statusCode ?? 0).toBe(0);
    // Refused: the owner is gone by the time the service asks (after the preauth).
    const owner = stack.owner;
    const pending = stack.executeText('314', { steps: [{ op: 'wait', ms: 300 }, { op: 'http', path: '/api/v4/projects/1' }, { op: 'end' }] });
    await stack.workflow.waitFor(() => stack!.workflow.callsFor('314').length === 1, 5_000, 'call start');
    await owner.close();
    expect((await pending).status).toBe(200);
    const refused = stack.workflow.callsFor('314')[0]?.actionResponses[0]?.response.httpResponse;
    expect(refused?.error).toMatch(/^dial tcp 127\.0\.0\.1:\d+: connect: connection refused$/);
    expect(metricValue(await stack.metrics(), 'longrun_http_relay_errors_total', { type: 'network' })).toBe(2);
  });
});

describe('the words of a network failure (Go net package wording)', () => {
  it('a name that does not resolve is "no such host"', async () => {
    // A real getaddrinfo failure that needs no DNS server: a 64-character label is not a
    // valid name (RFC 1035: at most 63), so the resolver refuses it before any query.
    const host = `${'a'.repeat(64)}.example`;
    const err = await new Promise<NodeJS.ErrnoException>((resolve) => dns.lookup(host, (e) => resolve(e as NodeJS.ErrnoException)));
    expect(err.code).toBe('ENOTFOUND');
    expect(networkErrorText(err, `${host}:443`)).toBe(`dial tcp: lookup ${host}: no such host`);
  });

  it('a refused connection names the address', async () => {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const err = await new Promise<Error>((resolve) => net.connect(port, '127.0.0.1').on('error', resolve));
    expect(networkErrorText(err, `127.0.0.1:${port}`)).toBe(`dial tcp 127.0.0.1:${port}: connect: connection refused`);
  });

  it('anything unrecognised keeps its own message', () => {
    expect(networkErrorText(new Error('something odd'), 'owner:80')).toBe('request failed: something odd');
  });
});

describe('methods (least privilege: GET, HEAD, POST, PUT, PATCH, DELETE only)', () => {
  it('any other method is answered as an error and never reaches the owner', async () => {
    stack = await startStack({ preauth: blocking });
    const refused = ['CONNECT', 'TRACE', 'OPTIONS', 'PROPFIND', 'get / HTTP/1.1'];
    const answers = await relayed('320', [
      ...refused.map((method): Step => ({ op: 'http', method, path: '/api/v4/echo' })),
      { op: 'http', method: 'patch', path: '/api/v4/echo' },
      { op: 'http', method: 'HEAD', path: '/api/v4/echo' },
      { op: 'http', method: 'DELETE', path: '/api/v4/echo' },
    ]);
    expect(answers).toHaveLength(refused.length + 3);
    for (const [i, method] of refused.entries()) {
      expect(answers[i]?.error, method).toMatch(/^invalid method: .* \(allowed: GET, HEAD, POST, PUT, PATCH, DELETE\)$/);
      expect(answers[i]?.statusCode ?? 0, method).toBe(0);
    }
    expect(answers.slice(refused.length).map((a) => [a.statusCode, a.error ?? ''])).toEqual([
      [200, ''],
      [200, ''],
      [200, ''],
    ]);
    // Only the allowed methods were sent; a lower-case method is sent in upper case.
    expect([...stack.owner.apiRequests, ...stack.owner.rejectedApi].map((r) => r.method)).toEqual(['PATCH', 'HEAD', 'DELETE']);
    expect(metricValue(await stack.metrics(), 'longrun_http_relay_errors_total', { type: 'refused_method' })).toBe(refused.length);
  });
});
