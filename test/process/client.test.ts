/**
 * @longrun/client against a real gateway (in-process stack, real simulators, a real
 * redis-server where the lock store matters): every answer of docs/spec.md §3 becomes its typed
 * result or a LongrunError with its code; retries honour Retry-After, move across
 * endpoints and stop at the deadline; 409 WORKFLOW_LOCKED is a result and never retried;
 * the internal routes get an owner JWT; the segment-end callback is verified.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import express from 'express';
import { LongrunClient, LongrunError, type Checkpoint, type RetryClock, type SegmentEnd } from '@longrun/client';
import { segmentEndMiddleware, segmentEndOf } from '@longrun/client/express';
import { signJwt, WORKHORSE_ISSUER } from '../../src/core/jwt';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { freePort } from '../../stack/ports';
import { startRedis, type RedisServer } from '../../stack/redis-server';
import { testSecret, wrongSecret } from '../../stack/secret';
import { startStack, type Stack } from '../../stack';

const hang: Step[] = [{ op: 'checkpoint', text: 'working' }, { op: 'hang' }];
const quick: Step[] = [{ op: 'end' }];
const meta = (steps: Step[]): { workflowMetadata: string } => ({ workflowMetadata: scenarioMetadata(steps) });

/** A retry clock that records each wait and jumps time forward instead of sleeping; `onSleep` runs during the wait. */
function fakeClock(onSleep?: (ms: number, n: number) => Promise<void> | void): { clock: RetryClock; waits: number[] } {
  let offset = 0;
  const waits: number[] = [];
  return {
    waits,
    clock: {
      now: () => Date.now() + offset,
      sleep: async (ms) => {
        waits.push(ms);
        offset += ms;
        await onSleep?.(ms, waits.length);
      },
      random: () => 0.5,
    },
  };
}

let nextWorkflow = 9_000;
const newWorkflow = (): string => String(nextWorkflow++);

let stack: Stack;
const clients: LongrunClient[] = [];
function clientFor(url: string | string[], options: Partial<ConstructorParameters<typeof LongrunClient>[0]> = {}): LongrunClient {
  const client = new LongrunClient({ url, secret: testSecret, ...options });
  clients.push(client);
  return client;
}

beforeAll(async () => {
  stack = await startStack({ preauth: { detached: true } });
});

afterAll(async () => {
  await stack.close();
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
});

describe('execute: every answer a typed result or error', () => {
  it('202 accepted: run id, acceptance, the request id sent and echoed, seen by the owner and the service', async () => {
    const client = clientFor(stack.url);
    const id = newWorkflow();
    const result = await client.execute(id, { goal: 'g', workflowMetadata: { scenario: hang } }, { requestId: 'dispatch-abc_1' });
    expect(result).toMatchObject({ kind: 'accepted', workflowId: id, acceptedOn: 'first_action', requestId: 'dispatch-abc_1', endpoint: stack.url, attempts: 1 });
    expect(result.kind === 'accepted' && result.runId).toMatch(/^[0-9a-f-]{36}$/);
    expect(stack.owner.preauths.at(-1)?.headers['x-request-id']).toBe('dispatch-abc_1');
    expect(stack.workflow.callsFor(id)[0]?.metadata['x-request-id']).toBe('dispatch-abc_1');
    // The metadata object was sent as the JSON string the contract wants.
    expect(JSON.parse(stack.workflow.callsFor(id)[0]?.startRequest.workflowMetadata ?? '')).toEqual({ scenario: hang });
    await client.stop(id);
  });

  it('200 finished: a turn that ended before acceptance; a request id is made when none is given', async () => {
    const result = await clientFor(stack.url).execute(newWorkflow(), meta([{ op: 'end' }]));
    expect(result.kind).toBe('finished');
    expect(result.requestId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('409 WORKFLOW_LOCKED is the result `locked` (the run in flight is the turn), never retried', async () => {
    const { clock, waits } = fakeClock();
    const client = clientFor(stack.url, { clock });
    const id = newWorkflow();
    expect((await client.execute(id, meta(hang))).kind).toBe('accepted');
    const preauthsBefore = stack.owner.preauths.length;
    const again = await client.execute(id, meta(hang));
    expect(again).toMatchObject({ kind: 'locked', workflowId: id, retryAfterS: 5, attempts: 1 });
    expect(stack.owner.preauths.length - preauthsBefore).toBe(1);
    expect(waits).toEqual([]);
    expect(stack.workflow.callsFor(id)).toHaveLength(1);
    await client.stop(id);
  });

  it('409 STOPPED is the result `stopped`: the owner stopped the turn before acceptance', async () => {
    const client = clientFor(stack.url);
    const id = newWorkflow();
    const pending = client.execute(id, meta([{ op: 'wait', ms: 3_000 }, { op: 'end' }]));
    await stack.workflow.waitFor(() => stack.workflow.callsFor(id).length === 1, 5_000, 'call start');
    expect((await client.stop(id)).kind).toBe('stop_requested');
    expect(await pending).toMatchObject({ kind: 'stopped', workflowId: id });
  });

  it('400 INVALID_REQUEST, owner refusals (PREAUTH_DENIED with its status and body) and 403 USAGE_QUOTA_EXCEEDED are errors, not retried', async () => {
    const { clock, waits } = fakeClock();
    const client = clientFor(stack.url, { clock });
    const invalid = await client.execute(newWorkflow(), { workflowID: 'another' }, { requestId: 'bad-1' }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(LongrunError);
    expect(invalid).toMatchObject({ code: 'INVALID_REQUEST', status: 400, retryable: false, requestId: 'bad-1', attempts: 1 });

    const denied = newWorkflow();
    stack.owner.configure(denied, { deny: { status: 404, body: '{"message":"404 Workflow Not Found"}' } });
    const refusal = await client.execute(denied).catch((e: unknown) => e);
    expect(refusal).toMatchObject({ code: 'PREAUTH_DENIED', status: 404, retryable: false, body: '{"message":"404 Workflow Not Found"}' });

    const quota = await client.execute(newWorkflow(), meta([{ op: 'fail', code: 'RESOURCE_EXHAUSTED', message: 'USAGE_QUOTA_EXCEEDED: monthly' }])).catch((e: unknown) => e);
    expect(quota).toMatchObject({ code: 'USAGE_QUOTA_EXCEEDED', status: 403, retryable: false, attempts: 1 });
    expect(waits).toEqual([]);
  });

  it('502s are retried with backoff until maxAttempts; the last error carries its attempts', async () => {
    const { clock, waits } = fakeClock();
    const client = clientFor(stack.url, { clock, retry: { maxAttempts: 4, baseDelayMs: 200 } });
    const id = newWorkflow();
    stack.owner.configure(id, { detached: true, malformed: 'json' });
    const before = stack.owner.preauths.length;
    const error = await client.execute(id).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'PREAUTH_INVALID', status: 502, retryable: true, attempts: 4 });
    expect(stack.owner.preauths.length - before).toBe(4);
    // Equal jitter at random 0.5: three quarters of 200, 400, 800.
    expect(waits).toEqual([150, 300, 600]);
  });

  it('502 WORKFLOW_SERVICE_UNAVAILABLE is retried until the service is back, then accepted', async () => {
    const id = newWorkflow();
    stack.owner.configure(id, { detached: true, serviceUri: `127.0.0.1:${await freePort()}` });
    const { clock, waits } = fakeClock((_ms, n) => {
      if (n === 2) stack.owner.configure(id, { detached: true });
    });
    const result = await clientFor(stack.url, { clock }).execute(id, meta(hang));
    expect(result).toMatchObject({ kind: 'accepted', attempts: 3 });
    expect(waits).toHaveLength(2);
    await clientFor(stack.url).stop(id);
  });

  it('502 OWNER_UNAVAILABLE (the preauth missed its deadline) is retryable; retry: false makes one attempt', async () => {
    const slowOwner = await startStack({ preauth: { detached: true, delayMs: 1_000 }, env: { LONGRUN_PREAUTH_TIMEOUT_MS: '200' } });
    try {
      const error = await clientFor(slowOwner.url)
        .execute(newWorkflow(), meta(quick), { retry: false })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'OWNER_UNAVAILABLE', status: 502, retryable: true, attempts: 1 });
    } finally {
      await slowOwner.close();
    }
  });

  it('a network error moves to the next endpoint at once; alone, it is NETWORK_ERROR', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const { clock, waits } = fakeClock();
    const id = newWorkflow();
    const result = await clientFor([dead, stack.url], { clock }).execute(id, meta(quick));
    expect(result).toMatchObject({ kind: 'finished', endpoint: stack.url, attempts: 2 });
    expect(waits).toEqual([]);
    const error = await clientFor(dead)
      .execute(id, meta(quick), { retry: false })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'NETWORK_ERROR', status: undefined, retryable: true, attempts: 1, endpoint: dead });
  });

  it('an answer that is not the gateway’s: a proxy’s 502 page is UNEXPECTED_RESPONSE, retryable', async () => {
    const proxy = http.createServer((_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' }).end('<html>Bad Gateway</html>');
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const { clock } = fakeClock();
      const error = await clientFor(url, { clock, retry: { maxAttempts: 2 } })
        .execute('1')
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'UNEXPECTED_RESPONSE', status: 502, retryable: true, attempts: 2, body: '<html>Bad Gateway</html>' });
    } finally {
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});

describe('retries that honour Retry-After', () => {
  it('503 DRAINING (Retry-After 1): the next endpoint at once; alone, waits of 1 s plus jitter until the deadline', async () => {
    const draining = await startStack({ preauth: { detached: true }, env: { LONGRUN_SHUTDOWN_DELAY_MS: '3000' } });
    try {
      void draining.gateway.drain();
      const id = newWorkflow();
      const { clock, waits } = fakeClock();
      const moved = await clientFor([draining.url, stack.url], { clock }).execute(id, meta(quick));
      expect(moved).toMatchObject({ kind: 'finished', endpoint: stack.url, attempts: 2 });
      expect(waits).toEqual([]);

      const alone = fakeClock();
      const error = await clientFor(draining.url, { clock: alone.clock, retry: { deadlineMs: 5_000 } })
        .execute(id, meta(quick))
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'DRAINING', status: 503, retryAfterS: 1, retryable: true });
      // 1 s × (1 + 0.2 × 0.5) each, as many as fit in 5 s.
      expect(alone.waits).toEqual([1_100, 1_100, 1_100, 1_100]);
      expect((error as LongrunError).attempts).toBe(5);

      // With real randomness the jitter stays within [1 s, 1.2 s].
      const jittered: number[] = [];
      const real: RetryClock = { now: () => Date.now(), random: Math.random, sleep: async (ms) => void jittered.push(ms) };
      await clientFor(draining.url, { clock: real, retry: { maxAttempts: 20 } })
        .execute(id, meta(quick))
        .catch(() => undefined);
      expect(jittered).toHaveLength(19);
      for (const ms of jittered) expect(ms >= 1_000 && ms <= 1_200).toBe(true);
      expect(new Set(jittered).size).toBeGreaterThan(1);
    } finally {
      await draining.close();
    }
  });

  it('503 CAPACITY_EXHAUSTED (Retry-After 5) past the deadline: given up at once, for the caller to reschedule', async () => {
    const full = await startStack({ preauth: { detached: true }, env: { LONGRUN_MAX_DETACHED_RUNS: '1' } });
    try {
      const { clock, waits } = fakeClock();
      const client = clientFor(full.url, { clock, retry: { deadlineMs: 3_000 } });
      const held = newWorkflow();
      expect((await client.execute(held, meta(hang))).kind).toBe('accepted');
      const error = await client.execute(newWorkflow(), meta(hang)).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'CAPACITY_EXHAUSTED', status: 503, retryAfterS: 5, attempts: 1 });
      expect(waits).toEqual([]);
      await client.stop(held);
    } finally {
      await full.close();
    }
  });

  it('429 ACTOR_LIMIT (Retry-After 30): waited out, then accepted once the actor’s other run ended', async () => {
    const capped = await startStack({ preauth: { detached: true, actorId: 'user-7' }, env: { LONGRUN_MAX_RUNS_PER_ACTOR: '1' } });
    try {
      const first = newWorkflow();
      const second = newWorkflow();
      const helper = clientFor(capped.url);
      expect((await helper.execute(first, meta(hang))).kind).toBe('accepted');
      const { clock, waits } = fakeClock(async () => {
        await helper.stop(first);
        await capped.owner.waitFor(() => capped.owner.segmentEnds.some((e) => e.workflow_id === first), 5_000, 'first run end');
      });
      const result = await clientFor(capped.url, { clock, retry: { deadlineMs: 60_000 } }).execute(second, meta(hang));
      expect(result).toMatchObject({ kind: 'accepted', attempts: 2 });
      expect(waits).toEqual([33_000]);
      await helper.stop(second);
    } finally {
      await capped.close();
    }
  });

  describe('with a real Redis', () => {
    let redis: RedisServer;
    let locked: Stack;
    beforeAll(async () => {
      redis = await startRedis();
      // A short lease: the Redis restarted empty is fenced for one lease TTL (store-fence.lua), and the client waits it out.
      locked = await startStack({ preauth: { detached: true }, redis: { url: redis.url }, env: { LONGRUN_REDIS_CONNECT_TIMEOUT_MS: '300', LONGRUN_LEASE_TTL_MS: '1500' } });
    });
    afterAll(async () => {
      await locked.close();
      await redis.stop();
    });

    it('503 LOCK_UNAVAILABLE while Redis is down (Retry-After 2), and while the store it came back as is fenced, accepted once it is back', async () => {
      await redis.stop();
      const id = newWorkflow();
      const { clock, waits } = fakeClock(async (_ms, n) => {
        if (n === 1) await redis.restart();
        await new Promise((resolve) => setTimeout(resolve, 300));
      });
      const result = await clientFor(locked.url, { clock, retry: { deadlineMs: 60_000 } }).execute(id, meta(hang));
      expect(result).toMatchObject({ kind: 'accepted' });
      expect(waits[0]).toBe(2_200);
      await clientFor(locked.url).stop(id);
    });
  });
});

describe('blocking mode: checkpoints as an async iterator', () => {
  let blocking: Stack;
  beforeAll(async () => {
    blocking = await startStack({ preauth: { detached: false, lockConcurrentFlow: true }, env: { LONGRUN_KEEPALIVE_MS: '50' } });
  });
  afterAll(async () => {
    await blocking.close();
  });

  it('yields each checkpoint, skips the keepalive lines, and ends typed', async () => {
    const result = await clientFor(blocking.url).execute(
      newWorkflow(),
      meta([{ op: 'checkpoint', text: 'one' }, { op: 'wait', ms: 300 }, { op: 'checkpoint', text: 'two', status: 'FINISHED' }, { op: 'wait', ms: 200 }, { op: 'end' }]),
    );
    if (result.kind !== 'streaming') throw new Error(`expected a stream, got ${result.kind}`);
    const seen: Checkpoint[] = [];
    for await (const checkpoint of result.stream) seen.push(checkpoint);
    expect(seen.map((c) => c.newCheckpoint.checkpoint)).toEqual(['one', 'two']);
    expect(seen[0]?.newCheckpoint).toMatchObject({ status: 'RUNNING', errors: [], agent_context_usage: {} });
    const end = await result.stream.end;
    expect(end).toMatchObject({ kind: 'ended', checkpoints: 2 });
    expect(end.last?.newCheckpoint.status).toBe('FINISHED');
  });

  it('leaving the loop early hangs up: the gateway cancels the run', async () => {
    const id = newWorkflow();
    const result = await clientFor(blocking.url).execute(id, meta([{ op: 'checkpoint', text: 'one' }, { op: 'hang' }]));
    if (result.kind !== 'streaming') throw new Error(`expected a stream, got ${result.kind}`);
    for await (const checkpoint of result.stream) {
      expect(checkpoint.newCheckpoint.checkpoint).toBe('one');
      break;
    }
    expect(await result.stream.end).toMatchObject({ kind: 'cancelled', checkpoints: 1 });
    await blocking.workflow.waitFor(() => blocking.workflow.callsFor(id)[0]?.ended !== undefined, 5_000, 'call end');
    expect(blocking.workflow.callsFor(id)[0]?.ended?.how).toBe('cancelled');
  });
});

describe('internal routes with the owner JWT made for you', () => {
  it('getRun reads the run in flight on any replica, null after; stop names its reason; no run is not_cancellable', async () => {
    const client = clientFor(stack.url);
    const id = newWorkflow();
    const started = await client.execute(id, meta(hang));
    expect(started.kind).toBe('accepted');
    const record = await client.getRun(id);
    expect(record).toMatchObject({ workflow_id: id, run_id: started.kind === 'accepted' ? started.runId : '', transport: 'detached', state: 'running', in_flight: [] });
    expect(await client.stop(id, { reason: 'CANCELLED_BY_USER', requestId: 'stop-1' })).toEqual({
      kind: 'stop_requested',
      workflowId: id,
      reason: 'CANCELLED_BY_USER',
      requestId: 'stop-1',
    });
    await stack.workflow.waitFor(() => stack.workflow.callsFor(id)[0]?.ended !== undefined, 5_000, 'stop');
    expect(stack.workflow.callsFor(id)[0]?.stopReasons).toEqual(['CANCELLED_BY_USER']);
    await expect.poll(() => client.getRun(id), { timeout: 3_000 }).toBeNull();
    expect(await client.stop(id)).toMatchObject({ kind: 'not_cancellable', workflowId: id });
  });

  it('a client with the wrong secret gets UNAUTHORIZED, not retried; without a secret the call is refused', async () => {
    const { clock, waits } = fakeClock();
    const error = await clientFor(stack.url, { secret: wrongSecret, clock })
      .getRun('1')
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'UNAUTHORIZED', status: 401, retryable: false, attempts: 1 });
    expect(waits).toEqual([]);
    await expect(new LongrunClient({ url: stack.url }).stop('1')).rejects.toThrow(/needs the shared secret/);
  });
});

describe('the segment-end callback, verified', () => {
  const received: SegmentEnd[] = [];
  let mounted = false;
  const mount = (): void => {
    if (mounted) return;
    mounted = true;
    const router = express.Router();
    router.post('/api/v4/internal/ai/duo_workflows/workflows/:workflow_id/segment_end', segmentEndMiddleware({ secret: testSecret }), (_req, res) => {
      received.push(segmentEndOf(res));
      res.status(204).end();
    });
    stack.owner.use(router);
  };
  const post = async (workflowId: string, token: string | undefined, body: unknown): Promise<{ status: number; text: string }> => {
    const res = await request(`${stack.owner.url}/api/v4/internal/ai/duo_workflows/workflows/${workflowId}/segment_end`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { 'gitlab-workhorse-api-request': token } : {}) },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: res.statusCode, text: await res.body.text() };
  };
  const good = { workflow_id: '77', run_id: 'r-1', reason: 'run_limit', segment_duration_s: 1.5, actions: 3, in_flight: [{ kind: 'http', request_id: '4', method: 'POST' }] };

  it('a real gateway callback passes the middleware and is parsed, in_flight included', async () => {
    mount();
    const id = newWorkflow();
    await clientFor(stack.url).execute(id, meta(hang));
    await clientFor(stack.url).stop(id);
    await expect.poll(() => received.find((e) => e.workflow_id === id), { timeout: 5_000 }).toMatchObject({ workflow_id: id, reason: 'stop_requested', in_flight: [] });
  });

  it('a bad, missing or foreign JWT is 401; a bad body or a body for another workflow is 400; nothing reaches the handler', async () => {
    mount();
    const before = received.length;
    expect((await post('77', undefined, good)).status).toBe(401);
    expect((await post('77', await signJwt(wrongSecret, WORKHORSE_ISSUER), good)).status).toBe(401);
    expect((await post('77', await signJwt(testSecret, 'gitlab'), good)).status).toBe(401);
    const token = await signJwt(testSecret, WORKHORSE_ISSUER);
    expect((await post('77', token, '{not json')).status).toBe(400);
    expect((await post('77', token, { ...good, reason: 'bored' })).status).toBe(400);
    expect((await post('77', token, { ...good, in_flight: [{ kind: 'ftp', request_id: '1', method: 'GET' }] })).status).toBe(400);
    expect((await post('78', token, good)).status).toBe(400);
    expect(received.length).toBe(before);
    expect((await post('77', token, good)).status).toBe(204);
    expect(received.at(-1)).toEqual(good);
    // An older gateway's body (no in_flight) reads as nothing in flight.
    const older: Record<string, unknown> = { ...good };
    delete older['in_flight'];
    expect((await post('77', token, older)).status).toBe(204);
    expect(received.at(-1)?.in_flight).toEqual([]);
  });
});
