/**
 * The Ruby reference dispatcher (examples/ruby-dispatcher: plain Ruby, net/http, Sidekiq-shaped
 * jobs on an in-process stand-in queue) run by Debian's `ruby` as a child process against the
 * built gateway (`node dist/src/main.js`, a child process), a real redis-server, and the
 * simulated owner and workflow service. The owner's router sends the segment-end callbacks
 * to the Ruby endpoint: the test forwards them as they are and records what the gateway sent
 * and what Ruby answered.
 *
 * Nine turns run at once (the run limit is 1.5 s):
 *   rb-turn     eight steps of 400 ms: cut into segments by the run limit, each resumed once
 *               with an empty goal, every step once, in order, until `finished`;
 *   rb-inflight every step relays a slow POST: the segment cut mid-write reports it in
 *               `in_flight`, and the next segment carries exactly that (workflowMetadata.resume);
 *   rb-later    the owner's preauth answers 429 Retry-After: 1, then 503 Retry-After: 2 (passed
 *               through by the gateway): the job is retried after each, never sooner;
 *   rb-stop     stopped through the internal route while its run is in flight;
 *   rb-stopd    stopped while its segment is being dispatched (the stop finds no run: 409
 *               NOT_CANCELLABLE), so the run that then starts is stopped;
 *   rb-adopt    a run the test started holds the workflow: the job's execute gets 409
 *               WORKFLOW_LOCKED, reads the run record and adopts it;
 *   rb-quick    ends before its first action: 200 finished, no callback;
 *   rb-refused  the owner refuses (403): the turn fails, nothing retried;
 *   rb-blocking the owner's preauth is not detached: the stream is closed unread, the turn fails;
 *   rb-lost     the owner drops its first callback (answers 204, acts on nothing): the watchdog
 *               (1 s period, 2 s confirmation) finds the run gone and resumes the turn.
 * Then the endpoint is called directly: forged, expired and wrong-issuer tokens are 401, bad
 * bodies 400, a callback repeated is acted on once.
 */
import { createHmac } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OwnerServiceSimulator } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import type { WorkflowServiceSimulator, CallRecord } from '../../sandbox/workflow-sim';
import { signJwt, signOwnerJwt, WORKHORSE_ISSUER } from '../../src/core/jwt';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';
import type { RedisServer } from '../../stack/redis-server';
import { RubyDispatcher, type RubyEvent } from '../helpers/ruby-dispatcher';
import { testSecret, wrongSecret } from '../../stack/secret';

const RUN_LIMIT_MS = 1_500;
/** The watchdog's period and confirmation (DISPATCHER_WATCH_PERIOD_S, DISPATCHER_LOST_CONFIRM_S), scaled down with the run limit. */
const WATCH_PERIOD_S = 1;
const LOST_CONFIRM_S = 2;
const SEGMENT_END = /^\/api\/v4\/internal\/ai\/duo_workflows\/workflows\/([^/]+)\/segment_end$/;

const scenarios: Record<string, Step[]> = {
  'rb-turn': [{ op: 'turn', checkpoints: 8, intervalMs: 400 }, { op: 'end' }],
  // Step i: 100 ms, then a 1 s POST, then its checkpoint; the run limit falls inside the second write.
  'rb-inflight': [{ op: 'turn', checkpoints: 3, intervalMs: 100, write: { method: 'POST', path: '/api/v4/slow?ms=1000' } }, { op: 'end' }],
  'rb-later': [{ op: 'checkpoint', text: 'working' }, { op: 'wait', ms: 200 }, { op: 'end' }],
  'rb-stop': [{ op: 'turn', checkpoints: 40, intervalMs: 200 }, { op: 'end' }],
  'rb-stopd': [{ op: 'turn', checkpoints: 40, intervalMs: 200 }, { op: 'end' }],
  'rb-adopt': [{ op: 'turn', checkpoints: 6, intervalMs: 300 }, { op: 'end' }],
  // Ends before its first action: answered 200 finished, no callback.
  'rb-quick': [{ op: 'end' }],
  'rb-refused': [{ op: 'end' }],
  'rb-blocking': [{ op: 'checkpoint', text: 'streaming' }, { op: 'hang' }],
  'rb-lost': [{ op: 'turn', checkpoints: 6, intervalMs: 300 }, { op: 'end' }],
};
/** Workflows whose next callback the owner drops: answered 204 to the gateway, never given to Ruby. */
const dropNextCallback = new Set<string>(['rb-lost']);

interface Callback {
  workflowId: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** What the Ruby endpoint answered; undefined while it has not. */
  status: number | undefined;
  /** The owner dropped it: Ruby never saw it. */
  dropped?: boolean;
}

let stack: Stack<'process'>;
let redis: RedisServer;
let workflow: WorkflowServiceSimulator;
let owner: OwnerServiceSimulator;
let gateway: Replica;
let ruby: RubyDispatcher;
const callbacks: Callback[] = [];
let adoptedRunId: string;

const callsOf = (id: string): CallRecord[] => workflow.calls.filter((c) => c.workflowId === id).sort((a, b) => a.startedAt - b.startedAt);
const metadataOf = (call: CallRecord): { scenario?: unknown; resume?: { after_run_id: string; reason: string; in_flight: unknown[] } } =>
  JSON.parse(call.startRequest.workflowMetadata ?? '{}') as never;
const callbacksOf = (id: string): Array<Callback & { json: { run_id: string; reason: string; in_flight: unknown[] } }> =>
  callbacks.filter((c) => c.workflowId === id).map((c) => ({ ...c, json: JSON.parse(c.body) as never }));
const preauthsOf = (id: string): number[] => owner.preauths.filter((p) => p.path.includes(`/workflows/${id}/execute`)).map((p) => p.at);

/** What the test does during a turn, started in beforeAll; its test awaits it. */
const drivers = new Map<string, Promise<void>>();
function drive(id: string, steps: () => Promise<void>): void {
  const done = steps();
  // Awaited (and its failure reported) by the turn's test.
  done.catch(() => undefined);
  drivers.set(id, done);
}

/** The turn's end, once every callback of it has been answered (Ruby ends the turn before it answers the last). */
async function turnEnded(id: string): Promise<RubyEvent> {
  const ended = await ruby.waitFor((e) => e.event === 'turn_ended' && e.workflow_id === id, 30_000, `the end of ${id}`);
  await expect.poll(() => callbacks.filter((c) => c.workflowId === id && c.status === undefined).length, { timeout: 5_000, interval: 10 }).toBe(0);
  return ended;
}
const start = (id: string): void => ruby.send({ cmd: 'start', workflow_id: id, goal: `turn ${id}`, metadata: { scenario: scenarios[id] } });

/** Every step of the turn sent once, in order, across its calls; no two calls of it at once. */
function expectEachStepOnce(id: string, steps: number): CallRecord[] {
  const calls = callsOf(id);
  expect(calls[0]?.turn?.from, id).toBe(0);
  for (let i = 1; i < calls.length; i++) {
    expect(calls[i]?.turn?.from, `${id} call ${i}`).toBe(calls[i - 1]?.turn?.to);
    expect(calls[i]?.startedAt, `${id} call ${i} starts after the last ended`).toBeGreaterThanOrEqual(calls[i - 1]?.ended?.at ?? Infinity);
  }
  expect(calls.at(-1)?.turn?.to, id).toBe(steps);
  expect(calls.at(-1)?.ended?.how, id).toBe('ok');
  return calls;
}

/** An HS256-style JWT signed as given (any alg, any claims), for the endpoint's refusals. */
function token(header: Record<string, unknown>, claims: Record<string, unknown>, secret: Buffer = testSecret, hash = 'sha256'): string {
  const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  const input = `${part(header)}.${part(claims)}`;
  return `${input}.${createHmac(hash, secret).update(input).digest('base64url')}`;
}

async function postCallback(workflowId: string, body: string, headers: Record<string, string>): Promise<number> {
  const res = await request(`${ruby.url}/api/v4/internal/ai/duo_workflows/workflows/${workflowId}/segment_end`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  await res.body.text();
  return res.statusCode;
}

beforeAll(async () => {
  stack = await startStack({ gateway: 'process', replicas: ['ruby-dispatcher'], redis: 'own', preauth: { detached: true }, env: { LONGRUN_RUN_LIMIT_MS: String(RUN_LIMIT_MS) } });
  ({ workflow, owner, gateway } = stack);
  redis = stack.redis as RedisServer;
  // A job per turn at once: rb-stopd's execute waits on its slow preauth.
  ruby = await RubyDispatcher.start({
    gatewayUrl: gateway.url,
    secretFile: stack.secretFile,
    env: { DISPATCHER_CONCURRENCY: '8', DISPATCHER_WATCH_PERIOD_S: String(WATCH_PERIOD_S), DISPATCHER_LOST_CONFIRM_S: String(LOST_CONFIRM_S) },
  });
  // The owner's router: segment ends go to the Ruby endpoint, headers and body as sent.
  owner.use((req, res, next) => {
    const match = req.method === 'POST' ? SEGMENT_END.exec(req.path) : null;
    if (!match) return next();
    const body = typeof req.body === 'string' ? req.body : '';
    const headers = { 'content-type': req.get('content-type') ?? '', 'gitlab-workhorse-api-request': req.get('gitlab-workhorse-api-request') ?? '' };
    const callback: Callback = { workflowId: decodeURIComponent(match[1] as string), headers: req.headers, body, status: undefined };
    callbacks.push(callback);
    if (dropNextCallback.delete(callback.workflowId)) {
      // An owner that lost it (its 204 sent, nothing recorded): longrun does not try again.
      Object.assign(callback, { status: 204, dropped: true });
      return void res.status(204).end();
    }
    request(`${ruby.url}${req.originalUrl}`, { method: 'POST', headers, body }).then(
      async (answer) => {
        const text = await answer.body.text();
        callback.status = answer.statusCode;
        res.status(answer.statusCode).send(text);
      },
      () => void res.status(502).end(),
    );
  });

  // rb-later: the owner is rate-limited, then down for maintenance, then answers.
  owner.configure('rb-later', { deny: { status: 429, body: '{"message":"429 Too Many Requests"}', headers: { 'Retry-After': '1' } } });
  // rb-stopd: the owner's preauth takes 2.5 s: the stop comes while the segment is being dispatched.
  owner.configure('rb-stopd', { delayMs: 2_500 });
  // rb-refused: the owner refuses for good. rb-blocking: the owner's preauth does not say Detached.
  owner.configure('rb-refused', { deny: { status: 403, body: '{"message":"403 Forbidden"}' } });
  owner.configure('rb-blocking', { detached: false });
  // rb-adopt: a run of the workflow in flight before the dispatcher's turn starts.
  const held = await gateway.execute('rb-adopt', scenarios['rb-adopt'] as Step[]);
  expect(held.status).toBe(202);
  adoptedRunId = held.body['run_id'] as string;

  for (const id of Object.keys(scenarios)) start(id);
  // What the owner and its users do meanwhile, at once for every turn (the tests run one by one).
  drive('rb-later', async () => {
    await owner.waitFor(() => preauthsOf('rb-later').length === 1, 10_000, 'the first preauth of rb-later');
    owner.configure('rb-later', { deny: { status: 503, body: '{"message":"503 Service Unavailable"}', headers: { 'Retry-After': '2' } } });
    await owner.waitFor(() => preauthsOf('rb-later').length === 2, 10_000, 'the second preauth of rb-later');
    owner.configure('rb-later', {});
  });
  drive('rb-stop', async () => {
    await ruby.waitFor((e) => e.event === 'accepted' && e.workflow_id === 'rb-stop', 15_000, 'rb-stop accepted');
    ruby.send({ cmd: 'stop', workflow_id: 'rb-stop', reason: 'CANCELLED_BY_USER' });
  });
  drive('rb-stopd', async () => {
    // The preauth is recorded when it arrives and answered 2.5 s later.
    for (const until = Date.now() + 10_000; preauthsOf('rb-stopd').length === 0; await sleep(20)) {
      if (Date.now() > until) throw new Error('no preauth of rb-stopd');
    }
    ruby.send({ cmd: 'stop', workflow_id: 'rb-stopd', reason: 'CANCELLED_BY_USER' });
  });
}, 60_000);

afterAll(async () => {
  await ruby?.close();
  // Everything seen, for looking into a failure (test-results/ is not committed).
  mkdirSync('test-results', { recursive: true });
  writeFileSync(
    'test-results/ruby-dispatcher.json',
    JSON.stringify({ events: ruby?.events, stderr: ruby?.stderr(), callbacks, calls: workflow?.calls.map((c) => ({ ...c, actionResponses: c.actionResponses.length })) }, null, 1),
  );
  await stack?.close();
});

describe('the Ruby reference dispatcher against the built gateway', () => {
  it('rb-later: a 429 with Retry-After: 1, then a 503 with Retry-After: 2 — each retried after its Retry-After, not sooner; then the turn runs', async () => {
    await drivers.get('rb-later');
    expect((await turnEnded('rb-later')).status).toBe('finished');

    const [first, second, third] = preauthsOf('rb-later') as [number, number, number];
    expect(preauthsOf('rb-later')).toHaveLength(3);
    expect(second - first, 'waited out Retry-After: 1').toBeGreaterThanOrEqual(1_000);
    expect(third - second, 'waited out Retry-After: 2').toBeGreaterThanOrEqual(2_000);
    // Without a Retry-After the job would have come back within 0.2 s and 0.4 s.
    const errors = ruby.of('rb-later', 'dispatch_error');
    expect(errors.map((e) => [e['code'], e['status'], e['retry_after_s'], e['will_retry']])).toEqual([
      ['PREAUTH_DENIED', 429, 1, true],
      ['PREAUTH_DENIED', 503, 2, true],
    ]);
    const retries = ruby.events.filter((e) => e.event === 'job_retry' && (e['args'] as string[])[0] === 'rb-later');
    expect(retries.map((e) => e['retry_after_s'])).toEqual([1, 2]);
    expect(retries[0]?.['delay_s']).toBeGreaterThanOrEqual(1);
    expect(retries[1]?.['delay_s']).toBeGreaterThanOrEqual(2);
    // The one call the service saw, and its end called back.
    expect(callsOf('rb-later')).toHaveLength(1);
    expect(callbacksOf('rb-later').map((c) => [c.json.reason, c.status])).toEqual([['finished', 204]]);
  });

  it('rb-turn: several segments across the run limit, each resumed once with an empty goal, every step once, until finished', async () => {
    expect(await turnEnded('rb-turn')).toMatchObject({ status: 'finished', reason: 'finished' });
    const calls = expectEachStepOnce('rb-turn', 8);
    expect(calls.length).toBeGreaterThanOrEqual(3);

    const accepted = ruby.of('rb-turn', 'accepted');
    const dispatched = ruby.of('rb-turn', 'dispatching');
    const ends = callbacksOf('rb-turn');
    expect(accepted).toHaveLength(calls.length);
    expect(dispatched).toHaveLength(calls.length);
    // Each segment resumes the run before it; the callbacks end them in that order.
    expect(accepted.map((e) => e['after_run_id'])).toEqual([null, ...accepted.slice(0, -1).map((e) => e['run_id'])]);
    expect(ends.map((c) => c.json.run_id)).toEqual(accepted.map((e) => e['run_id']));
    expect(ends.map((c) => c.json.reason)).toEqual([...Array<string>(calls.length - 1).fill('run_limit'), 'finished']);
    expect(ends.every((c) => c.status === 204)).toBe(true);
    // What the service was sent: the goal once, then resumes with no new input, the job's request id.
    calls.forEach((call, i) => {
      expect(call.metadata['x-request-id'], `call ${i}`).toBe(dispatched[i]?.['request_id']);
      expect(metadataOf(call).scenario).toEqual(scenarios['rb-turn']);
      if (i === 0) {
        expect(call.startRequest.goal).toBe('turn rb-turn');
        expect(metadataOf(call).resume).toBeUndefined();
      } else {
        expect(call.startRequest.goal ?? '').toBe('');
        expect(metadataOf(call).resume).toEqual({ after_run_id: accepted[i - 1]?.['run_id'], reason: 'run_limit', in_flight: [] });
      }
    });
  });

  it('rb-inflight: a segment cut mid-write reports it in_flight, and the next segment is dispatched with exactly that list', async () => {
    expect((await turnEnded('rb-inflight')).status).toBe('finished');
    const calls = expectEachStepOnce('rb-inflight', 3);
    const ends = callbacksOf('rb-inflight');
    expect(ends).toHaveLength(calls.length);
    const cut = ends.filter((c) => c.json.in_flight.length > 0);
    expect(cut.length).toBeGreaterThanOrEqual(1);
    for (const end of cut) expect(end.json.in_flight).toEqual([{ kind: 'http', request_id: expect.any(String) as string, method: 'POST' }]);
    // The Ruby dispatcher read it from the callback and handed it on.
    ends.slice(0, -1).forEach((end, i) => {
      expect(metadataOf(calls[i + 1] as CallRecord).resume).toEqual({ after_run_id: end.json.run_id, reason: end.json.reason, in_flight: end.json.in_flight });
    });
    expect(ruby.of('rb-inflight', 'segment_ended').map((e) => e['in_flight'])).toEqual(ends.map((c) => c.json.in_flight));
  });

  it('rb-stop: stopped through the internal route (owner JWT) while its run is in flight; the turn ends stopped, nothing dispatched after', async () => {
    await drivers.get('rb-stop');
    expect(await turnEnded('rb-stop')).toMatchObject({ status: 'stopped', reason: 'stop_requested' });
    expect(ruby.of('rb-stop', 'stop_answered').map((e) => e['answer'])).toEqual(['stop_requested']);
    const calls = callsOf('rb-stop');
    expect(calls).toHaveLength(1);
    expect(calls[0]?.stopReasons).toEqual(['CANCELLED_BY_USER']);
    expect(callbacksOf('rb-stop').map((c) => c.json.reason)).toEqual(['stop_requested']);
    expect(ruby.of('rb-stop', 'dispatching')).toHaveLength(1);
  });

  it('rb-stopd: a stop while the segment is being dispatched finds no run (409 NOT_CANCELLABLE); the run that then starts is stopped', async () => {
    await drivers.get('rb-stopd');
    expect(await turnEnded('rb-stopd')).toMatchObject({ status: 'stopped', reason: 'stop_requested' });
    expect(ruby.of('rb-stopd', 'stop_answered').map((e) => e['answer'])).toEqual(['not_cancellable', 'stop_requested']);
    const [notCancellable, , stopped] = ruby.of('rb-stopd').filter((e) => e.event === 'stop_answered' || e.event === 'accepted');
    expect(notCancellable?.['answer']).toBe('not_cancellable');
    expect(stopped?.['answer']).toBe('stop_requested');
    const calls = callsOf('rb-stopd');
    expect(calls).toHaveLength(1);
    expect(calls[0]?.stopReasons).toEqual(['CANCELLED_BY_USER']);
    expect(callbacksOf('rb-stopd').map((c) => c.json.reason)).toEqual(['stop_requested']);
  });

  it('rb-adopt: 409 WORKFLOW_LOCKED is not a failure: the job reads the run record and adopts the run in flight, then resumes it to the end', async () => {
    const adopting = await ruby.waitFor((e) => e.event === 'adopting' && e.workflow_id === 'rb-adopt', 15_000, 'rb-adopt adopted');
    expect(adopting['run_id']).toBe(adoptedRunId);
    expect(adopting['replica']).toBe('ruby-dispatcher');
    expect(ruby.of('rb-adopt', 'accepted')[0]).toMatchObject({ run_id: adoptedRunId, adopted: true, after_run_id: null });
    expect((await turnEnded('rb-adopt')).status).toBe('finished');
    const calls = expectEachStepOnce('rb-adopt', 6);
    // The job's own first execute never reached the service: the run in flight was the turn.
    expect(ruby.of('rb-adopt', 'dispatching')).toHaveLength(calls.length);
    expect(metadataOf(calls[1] as CallRecord).resume?.after_run_id).toBe(adoptedRunId);
  });

  it('rb-quick: a turn that ends before its run is accepted is answered 200 finished; no callback follows, the turn ends finished', async () => {
    expect(await turnEnded('rb-quick')).toMatchObject({ status: 'finished', reason: 'finished' });
    expect(ruby.of('rb-quick', 'segment_ended')).toMatchObject([{ reason: 'finished', via: 'execute' }]);
    expect(callsOf('rb-quick')).toHaveLength(1);
    expect(callbacksOf('rb-quick')).toEqual([]);
  });

  it('rb-refused: the owner’s 403 (no Retry-After, not retryable) fails the turn at once, without a retry', async () => {
    expect(await turnEnded('rb-refused')).toMatchObject({ status: 'failed', reason: 'PREAUTH_DENIED' });
    expect(ruby.of('rb-refused', 'dispatch_error')).toMatchObject([{ code: 'PREAUTH_DENIED', status: 403, will_retry: false }]);
    expect(preauthsOf('rb-refused')).toHaveLength(1);
    expect(callsOf('rb-refused')).toEqual([]);
  });

  it('rb-blocking: a preauth without Detached answers a stream; the job closes it unread and fails the turn, and the run ends', async () => {
    expect(await turnEnded('rb-blocking')).toMatchObject({ status: 'failed', reason: 'not_detached' });
    // The stream was left, not read to its end (the scenario never ends by itself): the gateway ended the call.
    await workflow.waitFor(() => callsOf('rb-blocking')[0]?.ended !== undefined, 10_000, 'the blocking call to end');
    expect(callsOf('rb-blocking')).toHaveLength(1);
    expect(callbacksOf('rb-blocking')).toEqual([]);
  });

  it('rb-lost: a callback the owner drops is recovered by the watchdog within its period and confirmation; the turn goes on to finished', async () => {
    expect(await turnEnded('rb-lost')).toMatchObject({ status: 'finished', reason: 'finished' });
    const calls = expectEachStepOnce('rb-lost', 6);
    expect(calls).toHaveLength(2);
    const [dropped, delivered] = callbacksOf('rb-lost');
    expect(dropped).toMatchObject({ dropped: true, json: { reason: 'run_limit' } });
    expect(delivered?.json.reason).toBe('finished');
    // Ruby never heard of the first run's end: the watchdog found its record gone, twice, and said so.
    const firstRun = dropped?.json.run_id;
    const findings = ruby.of('rb-lost', 'watchdog').filter((e) => e['run_id'] === firstRun);
    expect(findings.map((e) => e['finding'])).toContain('absent');
    const lost = findings.find((e) => e['finding'] === 'lost') as RubyEvent;
    expect(ruby.of('rb-lost', 'segment_ended')[0]).toMatchObject({ run_id: firstRun, reason: 'lost', via: 'watchdog' });
    // Within one period and the confirmation of the run's end (and the queue's scheduling), not at some later run limit.
    expect(lost.at_ms - (calls[0]?.ended?.at as number)).toBeLessThan((WATCH_PERIOD_S + LOST_CONFIRM_S) * 1_000 + 1_500);
    expect(metadataOf(calls[1] as CallRecord).resume).toEqual({ after_run_id: firstRun, reason: 'lost', in_flight: [] });
    // The run the watchdog resumed was its own: a run alive was never reported gone.
    expect(ruby.events.filter((e) => e.event === 'watchdog' && e['finding'] === 'lost').map((e) => e.workflow_id)).toEqual(['rb-lost']);
  });

  it('the endpoint: a forged, expired, future, stale or wrong-issuer token is 401; a bad body 400; a repeated callback is acted on once', async () => {
    const now = Math.floor(Date.now() / 1_000);
    const hs256 = { alg: 'HS256', typ: 'JWT' };
    const body = (id: string, extra: Record<string, unknown> = {}): string =>
      JSON.stringify({ workflow_id: id, run_id: 'r-1', reason: 'run_limit', segment_duration_s: 1.5, actions: 3, in_flight: [], ...extra });
    const valid = await signJwt(testSecret, WORKHORSE_ISSUER);
    const [h, p] = valid.split('.') as [string, string];
    const refused: Array<[string, Record<string, string>]> = [
      ['no token', {}],
      ['another secret', { 'gitlab-workhorse-api-request': await signJwt(wrongSecret, WORKHORSE_ISSUER) }],
      ['the owner’s token (iss gitlab)', { 'gitlab-workhorse-api-request': await signOwnerJwt(testSecret, 'rb-x') }],
      ['alg none', { 'gitlab-workhorse-api-request': `${Buffer.from('{"alg":"none"}').toString('base64url')}.${p}.` }],
      ['HS512', { 'gitlab-workhorse-api-request': token({ alg: 'HS512' }, { iss: WORKHORSE_ISSUER, iat: now }, testSecret, 'sha512') }],
      ['expired', { 'gitlab-workhorse-api-request': token(hs256, { iss: WORKHORSE_ISSUER, iat: now - 80, exp: now - 70 }) }],
      ['issued 10 minutes ago', { 'gitlab-workhorse-api-request': token(hs256, { iss: WORKHORSE_ISSUER, iat: now - 600 }) }],
      ['issued in 10 minutes', { 'gitlab-workhorse-api-request': token(hs256, { iss: WORKHORSE_ISSUER, iat: now + 600 }) }],
      ['no iat', { 'gitlab-workhorse-api-request': token(hs256, { iss: WORKHORSE_ISSUER }) }],
      [
        'payload swapped',
        { 'gitlab-workhorse-api-request': `${h}.${Buffer.from(JSON.stringify({ iss: WORKHORSE_ISSUER, iat: now, x: 1 })).toString('base64url')}.${valid.split('.')[2]}` },
      ],
      ['garbage', { 'gitlab-workhorse-api-request': 'a.b' }],
    ];
    for (const [why, headers] of refused) expect(await postCallback('rb-x', body('rb-x'), headers), why).toBe(401);
    const fresh = { 'gitlab-workhorse-api-request': token(hs256, { iss: WORKHORSE_ISSUER, iat: now }) };
    expect(await postCallback('rb-x', body('rb-x'), fresh), 'the same claims, signed right').toBe(204);

    const badBodies: Array<[string, string]> = [
      ['not JSON', '{"workflow_id":'],
      ['an unknown reason', body('rb-x', { reason: 'bored' })],
      ['another workflow than the path', body('rb-y')],
      ['an in_flight entry of an unknown kind', body('rb-x', { in_flight: [{ kind: 'ftp', request_id: '1', method: 'GET' }] })],
      ['no run_id', body('rb-x', { run_id: '' })],
    ];
    for (const [why, text] of badBodies) expect(await postCallback('rb-x', text, fresh), why).toBe(400);
    // Its log lines may reach this process after its answers.
    await expect.poll(() => ruby.of('rb-x', 'callback_rejected').length).toBe(refused.length + badBodies.length);
    expect(ruby.of('rb-x', 'callback_rejected').map((e) => e['status'])).toEqual([...Array<number>(refused.length).fill(401), ...Array<number>(badBodies.length).fill(400)]);
    // A run nobody dispatched: recorded, nothing dispatched.
    expect(ruby.of('rb-x', 'segment_ended')).toHaveLength(1);
    expect(ruby.of('rb-x', 'dispatching')).toEqual([]);

    // The gateway's own callback of rb-turn's first segment, once more (its retry after a lost 204).
    const first = callbacksOf('rb-turn')[0] as Callback;
    const dispatchedBefore = ruby.of('rb-turn', 'dispatching').length;
    expect(await postCallback('rb-turn', first.body, { 'gitlab-workhorse-api-request': first.headers['gitlab-workhorse-api-request'] as string })).toBe(204);
    await ruby.waitFor((e) => e.event === 'segment_end_repeated' && e.workflow_id === 'rb-turn', 5_000, 'the repeat noticed');
    await sleep(300);
    expect(ruby.of('rb-turn', 'dispatching')).toHaveLength(dispatchedBefore);
    expect(ruby.of('rb-turn', 'resume_enqueued')).toHaveLength(dispatchedBefore - 1);
  });

  it('ends at the end of its stdin (exit 0), with nothing on stderr; the gateway left no lock, run record or stop key', async () => {
    expect(await ruby.close()).toBe(0);
    expect(ruby.events.at(-1)?.event).toBe('stopped');
    expect(ruby.events.filter((e) => ['unparsed', 'callback_failed', 'job_dead', 'accepted_stale', 'bad_command'].includes(e.event))).toEqual([]);
    expect(ruby.stderr()).toBe('');
    const client = new Redis(redis.url);
    try {
      expect(await client.keys('workhorse:duoworkflow:*')).toEqual([]);
    } finally {
      client.disconnect();
    }
  });
});
