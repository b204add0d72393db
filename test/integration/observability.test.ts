/**
 * Observability (docs/spec.md §7) over one scripted mix of runs on a real gateway and the
 * simulators: a detached success, an SSRF refusal, a usage-quota rejection, a run
 * limit, a lock conflict, a blocking success and a drain. Afterwards the /metrics text
 * holds exactly the expected counter values and passes `promtool check metrics`; the
 * captured log bytes hold one line per request and per run end and none of the secrets
 * that went by; every request id reached both simulators and came back.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { fromRoot } from '../../src/core/paths';
import { OWNER_OAUTH_TOKEN } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import { version } from '../../src/core/version';
import { findBinary, parseExposition, promtoolCheckMetrics, seriesKey, skipReason, type Sample } from '../helpers/prometheus';
import { startStack, type Stack } from '../../stack';

/** Secrets the caller sends; each must reach the owner and never a log line. */
const callerSecrets = {
  authorization: 'Bearer caller-pat-5be1c0ffee5ec12e7',
  cookie: '_gitlab_session=cookie-secret-9f8e7d6c5b4a',
  'x-gitlab-custom-token-header': 'custom-header-token-3141592653',
  'private-token': 'private-token-value-2718281828',
};

const ids = {
  success: 'obs-success',
  ssrf: 'obs-ssrf',
  quota: 'obs-quota',
  limit: 'obs-limit',
  conflict: 'obs-conflict',
  blocking: 'obs-blocking',
  drain: 'obs-drain',
} as const;

interface Mix {
  stack: Stack;
  statuses: Record<keyof typeof ids, number>;
  responseIds: Record<keyof typeof ids, string | undefined>;
  runIds: Partial<Record<keyof typeof ids, string>>;
  /** /metrics over HTTP just before the drain. */
  beforeDrain: { contentType: string | undefined; text: string };
  /** The registry after the drain (the ops listener is closed by then). */
  afterDrain: string;
  logs: string;
}

let mix: Mix;

async function executeAs(
  stack: Stack,
  which: keyof typeof ids,
  workflowId: string,
  steps: Step[],
): Promise<{ status: number; requestId: string | undefined; body: Record<string, unknown> }> {
  const res = await stack.executeText(workflowId, { steps, headers: { ...callerSecrets, 'x-request-id': ids[which] } });
  const requestId = res.headers['x-request-id'];
  return { status: res.status, requestId: typeof requestId === 'string' ? requestId : undefined, body: JSON.parse(res.text || '{}') as Record<string, unknown> };
}

beforeAll(async () => {
  const stack = await startStack({
    preauth: { detached: true, lockConcurrentFlow: true },
    // The run limit applies to every detached run here; the others end well within it.
    env: { LONGRUN_RUN_LIMIT_MS: '2000', LONGRUN_ACCEPT_WAIT_MS: '5000' },
  });
  stack.owner.configure('obs-blocking', { detached: false });
  const statuses = {} as Mix['statuses'];
  const responseIds = {} as Mix['responseIds'];
  const runIds: Mix['runIds'] = {};
  const record = (which: keyof typeof ids, r: { status: number; requestId: string | undefined; body: Record<string, unknown> }): void => {
    statuses[which] = r.status;
    responseIds[which] = r.requestId;
    if (typeof r.body['run_id'] === 'string') runIds[which] = r.body['run_id'];
  };

  record('success', await executeAs(stack, 'success', 'obs-success', [{ op: 'checkpoint', text: 'one' }, { op: 'http', path: '/api/v4/projects/7' }, { op: 'end' }]));
  record(
    'ssrf',
    await executeAs(stack, 'ssrf', 'obs-ssrf', [
      { op: 'checkpoint', text: 'one' },
      { op: 'http', path: 'http://169.254.169.254/latest/meta-data/' },
      { op: 'http', path: '//evil.example/steal' },
      { op: 'end' },
    ]),
  );
  record(
    'quota',
    await executeAs(stack, 'quota', 'obs-quota', [
      { op: 'wait', ms: 20 },
      { op: 'fail', code: 'RESOURCE_EXHAUSTED', message: 'USAGE_QUOTA_EXCEEDED: monthly quota used' },
    ]),
  );
  record('limit', await executeAs(stack, 'limit', 'obs-limit', [{ op: 'checkpoint', text: 'working' }, { op: 'hang' }]));
  // The limit run holds obs-limit's lock for its two seconds.
  record('conflict', await executeAs(stack, 'conflict', 'obs-limit', [{ op: 'end' }]));
  record('blocking', await executeAs(stack, 'blocking', 'obs-blocking', [{ op: 'checkpoint', text: 'streamed' }, { op: 'end' }]));
  await stack.owner.waitFor(() => stack.owner.segmentEnds.length === 3, 10_000, 'segment ends of success, ssrf and limit');

  record('drain', await executeAs(stack, 'drain', 'obs-drain', [{ op: 'checkpoint', text: 'long turn' }, { op: 'hang' }]));
  const res = await request(`${stack.opsUrl}/metrics`);
  const beforeDrain = { contentType: res.headers['content-type'] as string | undefined, text: await res.body.text() };
  await stack.gateway.drain();
  const afterDrain = await stack.gateway.metrics.registry.metrics();
  mix = { stack, statuses, responseIds, runIds, beforeDrain, afterDrain, logs: stack.logs() };
}, 60_000);

afterAll(async () => {
  await mix?.stack.close();
});

describe('the scripted mix', () => {
  it('answered each request as the spec says', () => {
    expect(mix.statuses).toEqual({ success: 202, ssrf: 202, quota: 403, limit: 202, conflict: 409, blocking: 200, drain: 202 });
    expect(mix.stack.owner.segmentEnds.map((e) => [e.workflow_id, e.reason]).sort()).toEqual([
      ['obs-drain', 'drain'],
      ['obs-limit', 'run_limit'],
      ['obs-ssrf', 'finished'],
      ['obs-success', 'finished'],
    ]);
    // The SSRF guard: refused paths never reached any server; the one good relay did.
    expect(mix.stack.owner.apiRequests.map((r) => r.path)).toEqual(['/api/v4/projects/7']);
    const ssrf = mix.stack.workflow.callsFor('obs-ssrf')[0];
    expect(ssrf?.actionResponses.map((a) => a.response.httpResponse?.error)).toEqual([expect.stringMatching(/^invalid path: /), expect.stringMatching(/^invalid path: /)]);
  });
});

describe('metrics', () => {
  const counters = (text: string): Map<string, number> => {
    const { samples, types } = parseExposition(text);
    const out = new Map<string, number>();
    for (const s of samples) if (s.name.startsWith('longrun_') && types.get(s.name) === 'counter') out.set(seriesKey(s.name, s.labels), s.value);
    return out;
  };
  const find = (samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined =>
    samples.find((s) => seriesKey(s.name, s.labels) === seriesKey(name, labels))?.value;

  it('every longrun counter holds exactly the expected value (all others are zero)', () => {
    const expected: Array<[string, Record<string, string>, number]> = [
      ['longrun_connections_total', { transport: 'detached' }, 5],
      ['longrun_connections_total', { transport: 'http' }, 1],
      ['longrun_connection_errors_total', { transport: 'detached', error_type: 'lock' }, 1],
      ['longrun_connection_errors_total', { transport: 'detached', error_type: 'rejected' }, 1],
      ['longrun_sessions_total', { code: 'OK' }, 3],
      ['longrun_sessions_total', { code: 'RESOURCE_EXHAUSTED' }, 1],
      ['longrun_sessions_total', { code: 'UNAVAILABLE' }, 2],
      ['longrun_session_errors_total', { code: 'RESOURCE_EXHAUSTED' }, 1],
      ['longrun_session_errors_total', { code: 'UNAVAILABLE' }, 2],
      ['longrun_teardowns_total', { transport: 'detached', reason: 'finished' }, 2],
      ['longrun_teardowns_total', { transport: 'detached', reason: 'stream_error' }, 1],
      ['longrun_teardowns_total', { transport: 'detached', reason: 'run_limit' }, 1],
      ['longrun_teardowns_total', { transport: 'detached', reason: 'drain' }, 1],
      ['longrun_teardowns_total', { transport: 'http', reason: 'finished' }, 1],
      ['longrun_stop_acks_total', { outcome: 'ack' }, 2],
      ['longrun_http_relay_actions_total', { method: 'GET', status: '2xx' }, 1],
      ['longrun_http_relay_errors_total', { type: 'refused_path' }, 2],
      ['longrun_actions_total', { type: 'newCheckpoint' }, 5],
      ['longrun_actions_total', { type: 'runHTTPRequest' }, 3],
      ['longrun_lock_operations_total', { op: 'acquire', result: 'ok' }, 6],
      ['longrun_lock_operations_total', { op: 'acquire', result: 'taken' }, 1],
      ['longrun_lock_operations_total', { op: 'release', result: 'ok' }, 6],
      ['longrun_callbacks_total', { result: 'ok' }, 4],
    ];
    const actual = counters(mix.afterDrain);
    const want = new Map(expected.map(([name, labels, value]) => [seriesKey(name, labels), value]));
    for (const key of actual.keys()) if (!want.has(key)) want.set(key, 0);
    expect(Object.fromEntries([...actual].sort())).toEqual(Object.fromEntries([...want].sort()));
  });

  it('histograms, gauges and the zero-initialised series a dashboard needs', () => {
    const { samples } = parseExposition(mix.afterDrain);
    expect(find(samples, 'longrun_session_duration_seconds_count', { transport: 'detached' })).toBe(5);
    expect(find(samples, 'longrun_session_duration_seconds_count', { transport: 'http' })).toBe(1);
    expect(find(samples, 'longrun_accept_duration_seconds_count', { accepted_on: 'first_action' })).toBe(4);
    expect(find(samples, 'longrun_accept_duration_seconds_count', { accepted_on: 'accept_wait_elapsed' })).toBe(0);
    expect(find(samples, 'longrun_stop_ack_duration_seconds_count', { outcome: 'ack' })).toBe(2);
    expect(find(samples, 'longrun_http_relay_duration_seconds_count')).toBe(1);
    // Every session fits the top bucket (3 600 s).
    expect(find(samples, 'longrun_session_duration_seconds_bucket', { transport: 'detached', le: '3600' })).toBe(5);
    expect(find(samples, 'longrun_session_duration_seconds_bucket', { transport: 'detached', le: '+Inf' })).toBe(5);
    for (const transport of ['http', 'detached']) {
      expect(find(samples, 'longrun_runs_in_flight', { transport })).toBe(0);
      expect(find(samples, 'longrun_connections_open', { transport })).toBe(0);
    }
    expect(find(samples, 'longrun_draining')).toBe(1);
    expect(find(samples, 'longrun_build_info', { version })).toBe(1);
    // Default process metrics are on, in this registry.
    expect(find(samples, 'process_start_time_seconds')).toBeGreaterThan(0);
    expect(samples.some((s) => s.name === 'nodejs_eventloop_lag_p99_seconds')).toBe(true);

    const before = parseExposition(mix.beforeDrain.text).samples;
    expect(mix.beforeDrain.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(find(before, 'longrun_runs_in_flight', { transport: 'detached' })).toBe(1);
    expect(find(before, 'longrun_connections_open', { transport: 'detached' })).toBe(1);
    expect(find(before, 'longrun_draining')).toBe(0);
  });

  it('label values come from finite vocabularies: no workflow id, request id or path appears', () => {
    for (const text of [mix.beforeDrain.text, mix.afterDrain]) {
      for (const needle of ['obs-', '/api/v4', '169.254', 'evil.example', OWNER_OAUTH_TOKEN]) expect(text).not.toContain(needle);
    }
  });

  const promtool = findBinary('promtool');
  it('`promtool check metrics` passes on the /metrics text', (ctx) => {
    const skip = skipReason('promtool', promtool);
    if (skip) {
      console.warn(`SKIPPED promtool check: ${skip}`);
      ctx.skip(skip);
      return;
    }
    expect(promtool, 'promtool is required in CI').toBeDefined();
    for (const text of [mix.beforeDrain.text, mix.afterDrain]) {
      const result = promtoolCheckMetrics(promtool as string, text);
      expect(result.output).toBe('');
      expect(result.status).toBe(0);
    }
  });

  it('every metric the Grafana dashboard queries exists', () => {
    const dashboard = JSON.parse(readFileSync(fromRoot('deploy/grafana/longrun-dashboard.json'), 'utf8')) as { panels: Array<{ targets?: Array<{ expr: string }> }> };
    const exprs = dashboard.panels.flatMap((p) => p.targets ?? []).map((t) => t.expr);
    expect(exprs.length).toBeGreaterThan(10);
    const families = new Set(parseExposition(mix.afterDrain).samples.map((s) => s.name));
    const used = new Set(exprs.flatMap((e) => e.match(/\b(?:longrun|process|nodejs)_[a-z0-9_]+/g) ?? []));
    for (const name of used) expect(families, `dashboard metric ${name}`).toContain(name);
  });
});

describe('logs', () => {
  const lines = (): Array<Record<string, unknown>> =>
    mix.logs
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  it('never contain a token, a JWT, a cookie or an Authorization value', () => {
    const received = [...mix.stack.owner.preauths, ...mix.stack.owner.apiRequests, ...mix.stack.owner.segmentEndRequests];
    const jwts = received.map((r) => r.headers['gitlab-workhorse-api-request']).filter((v): v is string => typeof v === 'string');
    // Non-vacuous: the secrets did travel (a JWT on every owner call, the caller's headers to preauth, the token on the relay).
    expect(jwts.length).toBe(received.length);
    expect(jwts.length).toBeGreaterThanOrEqual(7 + 1 + 4);
    for (const jwt of jwts) expect(jwt).toMatch(/^eyJ[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(mix.stack.owner.preauths[0]?.headers['authorization']).toBe(callerSecrets.authorization);
    expect(mix.stack.owner.preauths[0]?.headers['x-gitlab-custom-token-header']).toBe(callerSecrets['x-gitlab-custom-token-header']);
    expect(mix.stack.owner.apiRequests[0]?.headers['authorization']).toBe(`Bearer ${OWNER_OAUTH_TOKEN}`);
    expect(mix.stack.workflow.callsFor('obs-success')[0]?.metadata['x-gitlab-oauth-token']).toBe(OWNER_OAUTH_TOKEN);

    const secrets = [OWNER_OAUTH_TOKEN, ...Object.values(callerSecrets), ...Object.values(callerSecrets).map((v) => v.split(/[ =]/).pop() as string), ...new Set(jwts)];
    expect(mix.logs.length).toBeGreaterThan(0);
    for (const secret of secrets) expect(mix.logs, `log bytes contain ${secret.slice(0, 12)}…`).not.toContain(secret);
    expect(mix.logs).not.toMatch(/eyJ[\w-]+\.[\w-]+/);
    expect(mix.logs).not.toMatch(/Bearer [^[]/);
  });

  it('one line per execute request with request_id, workflow_id, transport, status and duration_ms', () => {
    const requests = lines().filter((l) => l['msg'] === 'execute request');
    expect(requests.map((l) => l['request_id']).sort()).toEqual(Object.values(ids).sort());
    for (const line of requests) {
      expect(line).toMatchObject({ level: 'info', service: 'longrun', workflow_id: expect.stringMatching(/^obs-/), transport: expect.stringMatching(/^(http|detached)$/) });
      expect(line['duration_ms']).toEqual(expect.any(Number));
      expect(line['status']).toEqual(expect.any(Number));
    }
    expect(requests.find((l) => l['request_id'] === ids.conflict)).toMatchObject({ workflow_id: 'obs-limit', status: 409, transport: 'detached' });
    expect(requests.find((l) => l['request_id'] === ids.blocking)).toMatchObject({ status: 200, transport: 'http' });
  });

  it('one line per run end with request_id, workflow_id, run_id, transport, reason and duration_ms', () => {
    const ends = lines().filter((l) => l['msg'] === 'run ended');
    const byRequest = Object.fromEntries(ends.map((l) => [l['request_id'], l]));
    expect(ends).toHaveLength(6);
    expect(byRequest[ids.success]).toMatchObject({ workflow_id: 'obs-success', run_id: mix.runIds.success, transport: 'detached', reason: 'finished' });
    expect(byRequest[ids.ssrf]).toMatchObject({ workflow_id: 'obs-ssrf', run_id: mix.runIds.ssrf, transport: 'detached', reason: 'finished' });
    expect(byRequest[ids.quota]).toMatchObject({ workflow_id: 'obs-quota', transport: 'detached', reason: 'stream_error' });
    expect(byRequest[ids.limit]).toMatchObject({ workflow_id: 'obs-limit', run_id: mix.runIds.limit, transport: 'detached', reason: 'run_limit' });
    expect(byRequest[ids.blocking]).toMatchObject({ workflow_id: 'obs-blocking', transport: 'http', reason: 'finished' });
    expect(byRequest[ids.drain]).toMatchObject({ workflow_id: 'obs-drain', run_id: mix.runIds.drain, transport: 'detached', reason: 'drain' });
    for (const line of ends) {
      expect(line['run_id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(line['duration_ms']).toEqual(expect.any(Number));
    }
    expect(byRequest[ids.limit]?.['duration_ms']).toBeGreaterThanOrEqual(1_990);
  });
});

describe('request ids across the mix', () => {
  it('every response echoed its X-Request-Id, errors included', () => {
    expect(mix.responseIds).toEqual(ids);
  });

  it('reached the owner on preauth, relay and segment-end callback', () => {
    const owner = mix.stack.owner;
    const preauthIds = owner.preauths.map((r) => [r.path.split('/')[6], r.headers['x-request-id']]);
    expect(preauthIds).toEqual([
      ['obs-success', ids.success],
      ['obs-ssrf', ids.ssrf],
      ['obs-quota', ids.quota],
      ['obs-limit', ids.limit],
      ['obs-limit', ids.conflict],
      ['obs-blocking', ids.blocking],
      ['obs-drain', ids.drain],
    ]);
    expect(owner.apiRequests.map((r) => r.headers['x-request-id'])).toEqual([ids.success]);
    const segmentEndIds = owner.segmentEndRequests.map((r) => [r.path.split('/')[7], r.headers['x-request-id']]).sort();
    expect(segmentEndIds).toEqual([
      ['obs-drain', ids.drain],
      ['obs-limit', ids.limit],
      ['obs-ssrf', ids.ssrf],
      ['obs-success', ids.success],
    ]);
  });

  it('is the correlation_id of every log line about a request or a run (docs/spec.md §13)', () => {
    const lines = mix.logs
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const about = lines.filter((l) => l['request_id'] !== undefined || l['run_id'] !== undefined);
    expect(about.length).toBeGreaterThanOrEqual(13);
    for (const line of about) expect([line['msg'], line['correlation_id']]).toEqual([line['msg'], line['request_id']]);
    expect(new Set(about.map((l) => l['correlation_id']))).toEqual(new Set(Object.values(ids)));
  });

  it('reached the workflow service as call metadata x-request-id and x-gitlab-correlation-id', () => {
    for (const call of mix.stack.workflow.calls) expect(call.metadata['x-gitlab-correlation-id']).toBe(call.metadata['x-request-id']);
    const metadataIds = mix.stack.workflow.calls.map((c) => [c.workflowId, c.metadata['x-request-id']]);
    expect(metadataIds).toEqual([
      ['obs-success', ids.success],
      ['obs-ssrf', ids.ssrf],
      ['obs-quota', ids.quota],
      ['obs-limit', ids.limit],
      ['obs-blocking', ids.blocking],
      ['obs-drain', ids.drain],
    ]);
  });
});
