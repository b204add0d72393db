/**
 * Detached mode (docs/spec.md §3b, §4 stop handshake, §5): acceptance, the run going on without
 * its caller, the run limit, failures before acceptance, exclusivity and the cap.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { lockKey } from '../../src/redis/keys';
import { signOwnerJwt } from '../../src/core/jwt';
import type { Step } from '../../sandbox/scenario';
import { testSecret } from '../../stack/secret';
import { metricValue, startStack, type Stack } from '../../stack';

let stack: Stack | undefined;

afterEach(async () => {
  // A stack started with `redis: 'own'` also stops its redis-server and client.
  await stack?.close();
  stack = undefined;
});

const detached = { detached: true, lockConcurrentFlow: true };

describe('detached mode is the owner’s decision', () => {
  it('?detached=true alone changes nothing: the owner says no, the caller gets a blocking stream', async () => {
    stack = await startStack({ preauth: { detached: false } });
    const res = await stack.executeText('100', { query: '?detached=true' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-ndjson');
    expect(res.text).toContain('newCheckpoint');
  });
});

describe('acceptance', () => {
  it('answers 202 on the first action, well before the accept wait, and the turn completes after the caller left', async () => {
    stack = await startStack({ redis: 'own', preauth: detached, env: { LONGRUN_ACCEPT_WAIT_MS: '5000' } });
    const steps: Step[] = [
      { op: 'wait', ms: 150 },
      { op: 'checkpoint', text: 'first' },
      { op: 'wait', ms: 200 },
      { op: 'http', path: '/api/v4/projects/9' },
      { op: 'unsupported', kind: 'runGitCommand' },
      { op: 'end' },
    ];
    const started = performance.now();
    const res = await stack.executeText('101', { steps, headers: { 'x-request-id': 'detached-1' } });
    const timeTo202 = performance.now() - started;
    expect(res.status).toBe(202);
    const body = JSON.parse(res.text);
    expect(body).toMatchObject({ status: 'accepted', workflow_id: '101', accepted_on: 'first_action' });
    expect(body.run_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(timeTo202).toBeGreaterThanOrEqual(150);
    expect(timeTo202).toBeLessThan(3_000);
    // The caller is gone (its response is complete); the run goes on.
    expect(await stack.client!.get(lockKey('101'))).toBeTruthy();
    await stack.workflow.waitFor(() => stack?.workflow.callsFor('101')[0]?.ended !== undefined, 5_000, 'turn end');
    const call = stack.workflow.callsFor('101')[0];
    expect(call?.ended?.how).toBe('ok');
    expect(call?.actionResponses.map((a) => a.kind)).toEqual(['runHTTPRequest', 'runGitCommand']);
    expect(call?.actionResponses[0]?.response.httpResponse?.statusCode).toBe(200);
    await expect.poll(() => stack!.client!.exists(lockKey('101')), { timeout: 5_000 }).toBe(0);
    await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 1, 5_000, 'segment end');
    expect(stack.owner.segmentEnds[0]).toMatchObject({ workflow_id: '101', run_id: body.run_id, reason: 'finished', actions: 3 });
    const metrics = await stack.metrics();
    expect(metricValue(metrics, 'longrun_teardowns_total', { transport: 'detached', reason: 'finished' })).toBe(1);
    expect(metricValue(metrics, 'longrun_accept_duration_seconds_count', { accepted_on: 'first_action' })).toBe(1);
  });

  it('answers 202 after the accept wait when the service stays silent, and the first action is still served', async () => {
    stack = await startStack({ redis: 'own', preauth: detached, env: { LONGRUN_ACCEPT_WAIT_MS: '200' } });
    const steps: Step[] = [{ op: 'wait', ms: 1_500 }, { op: 'http', path: '/api/v4/projects/3' }, { op: 'end' }];
    const started = performance.now();
    const res = await stack.executeText('102', { steps });
    const elapsed = performance.now() - started;
    expect(res.status).toBe(202);
    expect(JSON.parse(res.text).accepted_on).toBe('accept_wait_elapsed');
    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect(elapsed).toBeLessThan(1_400);
    await stack.workflow.waitFor(() => stack?.workflow.callsFor('102')[0]?.ended !== undefined, 5_000, 'turn end');
    expect(stack.workflow.callsFor('102')[0]?.actionResponses[0]?.response.httpResponse?.statusCode).toBe(200);
  });

  it('a stream that ends cleanly before acceptance answers 200 finished and releases the lock', async () => {
    stack = await startStack({ redis: 'own', preauth: detached });
    const res = await stack.executeText('103', { steps: [{ op: 'end' }] });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toMatchObject({ status: 'finished', workflow_id: '103' });
    expect(await stack.client!.exists(lockKey('103'))).toBe(0);
  });

  it('quota and invalid-argument rejections after a successful send are 403 and 400, never 202, and release the lock', async () => {
    stack = await startStack({ redis: 'own', preauth: detached });
    const quota = await stack.executeText('104', {
      steps: [
        { op: 'wait', ms: 50 },
        { op: 'fail', code: 'RESOURCE_EXHAUSTED', message: 'USAGE_QUOTA_EXCEEDED' },
      ],
    });
    expect(quota.status).toBe(403);
    expect(JSON.parse(quota.text).error.code).toBe('USAGE_QUOTA_EXCEEDED');
    const invalid = await stack.executeText('105', { steps: [{ op: 'fail', code: 'INVALID_ARGUMENT', message: 'no such flow' }] });
    expect(invalid.status).toBe(400);
    expect(JSON.parse(invalid.text).error.code).toBe('INVALID_REQUEST');
    const unavailable = await stack.executeText('106', { steps: [{ op: 'fail', code: 'UNAVAILABLE' }] });
    expect(unavailable.status).toBe(502);
    expect(JSON.parse(unavailable.text).error.code).toBe('WORKFLOW_SERVICE_UNAVAILABLE');
    for (const id of ['104', '105', '106']) expect(await stack.client!.exists(lockKey(id))).toBe(0);
    // Nothing was accepted, so the owner gets no segment-end callbacks for them.
    expect(stack.owner.segmentEnds).toHaveLength(0);
    const runs = await request(`${stack.opsUrl}/runs`).then((r) => r.body.json());
    expect(runs).toEqual({ runs: [] });
  });
});

describe('the lock is always taken for detached runs', () => {
  it('100 concurrent executes for one workflow start exactly one run', async () => {
    stack = await startStack({ redis: 'own', preauth: detached });
    // The run outlives the burst, so no execute can legitimately start a second one.
    const steps: Step[] = [{ op: 'checkpoint', text: 'go' }, { op: 'hang' }];
    const results = await Promise.all(Array.from({ length: 100 }, () => stack!.executeText('110', { steps })));
    const counts = results.reduce<Record<number, number>>((acc, r) => ({ ...acc, [r.status]: (acc[r.status] ?? 0) + 1 }), {});
    expect(counts).toEqual({ 202: 1, 409: 99 });
    expect(stack.workflow.callsFor('110')).toHaveLength(1);
  });

  it('Redis unreachable: 503 LOCK_UNAVAILABLE with Retry-After and no stream opened', async () => {
    stack = await startStack({ redis: 'own', preauth: detached });
    await stack.redis!.stop();
    const res = await stack.executeText('111');
    expect(res.status).toBe(503);
    // src/run/admission.ts: a lock store failing is retried shortly.
    expect(res.headers['retry-after']).toBe('2');
    expect(JSON.parse(res.text).error.code).toBe('LOCK_UNAVAILABLE');
    expect(stack.workflow.calls).toHaveLength(0);
    expect(metricValue(await stack.metrics(), 'longrun_unlocked_runs_total')).toBe(0);
  });

  it('taken: 409 WORKFLOW_LOCKED', async () => {
    stack = await startStack({ redis: 'own', preauth: detached });
    await stack.client!.set(lockKey('112'), 'someone-else', 'PX', 60_000);
    const res = await stack.executeText('112');
    expect(res.status).toBe(409);
    expect(JSON.parse(res.text).error.code).toBe('WORKFLOW_LOCKED');
    expect(await stack.client!.get(lockKey('112'))).toBe('someone-else');
  });
});

describe('the run limit and the stop handshake', () => {
  const hang: Step[] = [{ op: 'checkpoint', text: 'working' }, { op: 'hang' }];

  it('the public service (default allowlist): WORKHORSE_SERVER_SHUTDOWN sent, acked UNAVAILABLE, lock released, run_limit callback, the workflow still resumable', async () => {
    stack = await startStack({ redis: 'own', preauth: detached, env: { LONGRUN_RUN_LIMIT_MS: '500' } });
    const res = await stack.executeText('120', { steps: hang });
    expect(res.status).toBe(202);
    await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 1, 5_000, 'segment end');
    const call = stack.workflow.callsFor('120')[0];
    expect(call?.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    expect(call?.ended).toMatchObject({ how: 'status', code: 'UNAVAILABLE' });
    expect(stack.workflow.stoppedWorkflows.has('120')).toBe(false);
    expect(stack.owner.segmentEnds[0]?.reason).toBe('run_limit');
    expect(await stack.client!.exists(lockKey('120'))).toBe(0);
    const metrics = await stack.metrics();
    expect(metricValue(metrics, 'longrun_stop_acks_total', { outcome: 'ack' })).toBe(1);
    expect(metricValue(metrics, 'longrun_teardowns_total', { transport: 'detached', reason: 'run_limit' })).toBe(1);
  });

  it('a service that allowlists WORKHORSE_RUN_LIMIT, configured so: that word sent, acked OK, still released', async () => {
    const allowlist = ['WORKHORSE_SERVER_SHUTDOWN', 'WORKHORSE_WEBSOCKET_PING_FAILED', 'WORKHORSE_RUN_LIMIT'];
    stack = await startStack({
      redis: 'own',
      preauth: detached,
      workflow: { infraStopReasons: allowlist },
      env: { LONGRUN_RUN_LIMIT_MS: '500', LONGRUN_WORKFLOW_INFRA_STOP_REASONS: allowlist.join(',') },
    });
    expect((await stack.executeText('121', { steps: hang })).status).toBe(202);
    await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 1, 5_000, 'segment end');
    expect(stack.workflow.callsFor('121')[0]?.ended?.how).toBe('ok');
    expect(stack.workflow.callsFor('121')[0]?.stopReasons).toEqual(['WORKHORSE_RUN_LIMIT']);
    expect(stack.workflow.stoppedWorkflows.has('121')).toBe(false);
    expect(stack.owner.segmentEnds[0]?.reason).toBe('run_limit');
    expect(await stack.client!.exists(lockKey('121'))).toBe(0);
    expect(metricValue(await stack.metrics(), 'longrun_stop_acks_total', { outcome: 'ack' })).toBe(1);
  });

  it('a service that ignores stops: cancelled after the ack timeout, still released', async () => {
    stack = await startStack({ redis: 'own', preauth: detached, env: { LONGRUN_RUN_LIMIT_MS: '500', LONGRUN_STOP_ACK_TIMEOUT_MS: '300' } });
    stack.workflow.ignoreStops = true;
    const started = performance.now();
    expect((await stack.executeText('122', { steps: hang })).status).toBe(202);
    await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 1, 5_000, 'segment end');
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(780);
    expect(stack.workflow.callsFor('122')[0]?.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    expect(stack.workflow.callsFor('122')[0]?.ended?.how).toBe('cancelled');
    expect(await stack.client!.exists(lockKey('122'))).toBe(0);
    expect(metricValue(await stack.metrics(), 'longrun_stop_acks_total', { outcome: 'timeout' })).toBe(1);
  });

  it('does not wait out the ack timeout when the call ends at once', async () => {
    stack = await startStack({ redis: 'own', preauth: detached, env: { LONGRUN_RUN_LIMIT_MS: '500', LONGRUN_STOP_ACK_TIMEOUT_MS: '10000' } });
    const started = performance.now();
    expect((await stack.executeText('123', { steps: hang })).status).toBe(202);
    await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 1, 5_000, 'segment end');
    expect(performance.now() - started).toBeLessThan(3_000);
  });
});

describe('the per-process cap', () => {
  it('over LONGRUN_MAX_DETACHED_RUNS → 503 CAPACITY_EXHAUSTED with Retry-After; slots come back when runs end', async () => {
    stack = await startStack({ redis: 'own', preauth: detached, env: { LONGRUN_MAX_DETACHED_RUNS: '2' } });
    const hold: Step[] = [{ op: 'checkpoint', text: 'x' }, { op: 'hang' }];
    expect((await stack.executeText('130', { steps: hold })).status).toBe(202);
    expect((await stack.executeText('131', { steps: hold })).status).toBe(202);
    const over = await stack.executeText('132', { steps: hold });
    expect(over.status).toBe(503);
    // src/run/admission.ts: the process cap is retried after 5 s.
    expect(over.headers['retry-after']).toBe('5');
    expect(JSON.parse(over.text).error.code).toBe('CAPACITY_EXHAUSTED');
    expect(stack.workflow.callsFor('132')).toHaveLength(0);
    expect(await stack.client!.exists(lockKey('132'))).toBe(0);
    const runs = (await request(`${stack.opsUrl}/runs`).then((r) => r.body.json())) as { runs: Array<Record<string, unknown>> };
    expect(runs.runs.map((r) => r['workflow_id']).sort()).toEqual(['130', '131']);
    expect(runs.runs[0]).toMatchObject({ transport: 'detached', state: 'running', actions: 1 });
    expect(metricValue(await stack.metrics(), 'longrun_cap_rejections_total', { cap: 'process' })).toBe(1);
    // A run ending gives its slot back.
    const stop = await request(`${stack.url}/internal/workflows/130/stop`, { method: 'POST', headers: { authorization: `Bearer ${await signOwnerJwt(testSecret, '130')}` } });
    expect(stop.statusCode).toBe(202);
    await stop.body.dump();
    await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 1, 5_000, 'first end');
    expect((await stack.executeText('132', { steps: hold })).status).toBe(202);
  });
});

describe('a drain in process', () => {
  it('stops every held run (acknowledged: UNAVAILABLE), calls each back, and leaves stack traces as it found them', async () => {
    stack = await startStack({ preauth: { detached: true } });
    const hold: Step[] = [{ op: 'checkpoint', text: 'held' }, { op: 'hang' }];
    for (const id of ['140', '141', '142']) expect((await stack.executeText(id, { steps: hold })).status).toBe(202);
    const limit = Error.stackTraceLimit;
    expect(limit).toBeGreaterThan(0);
    await stack.gateway.drain();
    expect(stack.workflow.calls.map((c) => c.ended?.code).sort()).toEqual(['UNAVAILABLE', 'UNAVAILABLE', 'UNAVAILABLE']);
    expect(stack.owner.segmentEnds.map((e) => [e.workflow_id, e.reason]).sort()).toEqual([
      ['140', 'drain'],
      ['141', 'drain'],
      ['142', 'drain'],
    ]);
    expect(Error.stackTraceLimit).toBe(limit);
    expect(new Error('after the drain').stack).toMatch(/\n\s+at /);
  });

  it("sends its callbacks together past Node's listener warning threshold without a leak warning (they share the budget signal by design)", async () => {
    stack = await startStack({ preauth: { detached: true } });
    const ids = Array.from({ length: 14 }, (_, i) => String(150 + i));
    const hold: Step[] = [{ op: 'checkpoint', text: 'held' }, { op: 'hang' }];
    for (const id of ids) expect((await stack.executeText(id, { steps: hold })).status).toBe(202);
    // The owner answers no callback until all of them are in flight at once.
    const held: Array<() => void> = [];
    stack.owner.use((req, _res, next) => {
      if (!req.path.endsWith('/segment_end')) return next();
      held.push(next);
      if (held.length === ids.length) for (const go of held) go();
    });
    const warnings: Error[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning);
    process.on('warning', onWarning);
    try {
      await stack.gateway.drain();
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(held).toHaveLength(ids.length);
    expect(stack.owner.segmentEnds.map((e) => e.workflow_id).sort()).toEqual(ids);
    expect(warnings.map((w) => `${w.name}: ${w.message}`)).toEqual([]);
  });
});
