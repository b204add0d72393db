/**
 * The simulated workflow service (docs/spec.md §9) driven by a bare grpc-js client over a real
 * loopback channel: scenarios, the stop handshake and its infra allowlist, and what the
 * simulator records. Later gateway tests rely on every behaviour checked here.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import type { PingPolicy } from '../../sandbox/h2-front';
import { WorkflowServiceSimulator, type CallRecord } from '../../sandbox/workflow-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import type protobuf from 'protobufjs';
import { everyActionPayload } from '../../sandbox/every-action';
import type { ActionResponseMember } from '@longrun/client';
import { actionKinds, duoWorkflowService, messageTypes, type Action, type ActionResponse } from '../../src/workflow/contract';
import { WorkflowTestClient, type WorkflowTestCall } from '../helpers/workflow-client';

let nextWorkflowId = 1000;

/** Opens a call and sends a startRequest playing `steps` for a fresh workflow id. */
function start(client: WorkflowTestClient, steps: Step[] | undefined, metadata: Record<string, string> = {}): { call: WorkflowTestCall; workflowId: string } {
  const workflowId = String(nextWorkflowId++);
  const call = client.open(metadata);
  call.send({
    startRequest: {
      workflowID: workflowId,
      goal: `goal of ${workflowId}`,
      ...(steps === undefined ? {} : { workflowMetadata: scenarioMetadata(steps) }),
    },
  });
  return { call, workflowId };
}

function recordOf(sim: WorkflowServiceSimulator, workflowId: string): CallRecord {
  const [record, ...more] = sim.callsFor(workflowId);
  if (!record || more.length > 0) throw new Error(`expected exactly one call for ${workflowId}, got ${sim.callsFor(workflowId).length}`);
  return record;
}

async function ended(sim: WorkflowServiceSimulator, workflowId: string): Promise<CallRecord> {
  await sim.waitFor(() => sim.callsFor(workflowId)[0]?.ended !== undefined, 5_000, `call ${workflowId} to end`);
  return recordOf(sim, workflowId);
}

describe('workflow simulator: scenarios', () => {
  let sim: WorkflowServiceSimulator;
  let client: WorkflowTestClient;

  beforeAll(async () => {
    sim = await WorkflowServiceSimulator.start();
    client = new WorkflowTestClient(sim.address);
  });
  afterAll(async () => {
    client.close();
    await sim.close();
  });

  it('listens on a loopback port and reports it as host:port', () => {
    expect(sim.host).toBe('127.0.0.1');
    expect(sim.port).toBeGreaterThan(0);
    expect(sim.address).toBe(`127.0.0.1:${sim.port}`);
  });

  it('plays checkpoint, http, unsupported and end, recording every answer', async () => {
    const { call, workflowId } = start(client, [
      { op: 'checkpoint', text: '{"step":1}', status: 'RUNNING' },
      { op: 'http', method: 'POST', path: '/api/v4/projects/7', body: '{"a":1}' },
      { op: 'unsupported', kind: 'runReadFile' },
      { op: 'checkpoint', text: '{"step":2}', status: 'FINISHED' },
      { op: 'end' },
    ]);

    const first = await call.action(0);
    expect(first.action).toBe('newCheckpoint');
    expect(first.newCheckpoint).toMatchObject({ status: 'RUNNING', checkpoint: '{"step":1}', goal: `goal of ${workflowId}` });

    const http = await call.action(1);
    expect(http.action).toBe('runHTTPRequest');
    expect(http.runHTTPRequest).toMatchObject({ method: 'POST', path: '/api/v4/projects/7', body: '{"a":1}' });
    // The service waits for the answer before it moves on.
    await sleep(30);
    expect(call.actions).toHaveLength(2);
    call.send({
      actionResponse: {
        requestID: http.requestID ?? '',
        httpResponse: { statusCode: 201, body: '{"id":7}', headers: { 'content-type': 'application/json' } },
      },
    });

    const refused = await call.action(2);
    expect(refused.action).toBe('runReadFile');
    call.send({
      actionResponse: {
        requestID: refused.requestID ?? '',
        plainTextResponse: { error: 'action cannot be executed by this client: runReadFile' },
      },
    });

    const last = await call.action(3);
    expect(last.newCheckpoint).toMatchObject({ status: 'FINISHED', checkpoint: '{"step":2}' });
    expect(await call.status).toMatchObject({ codeName: 'OK' });

    const ids = call.actions.map((a: Action) => a.requestID);
    expect(new Set(ids).size).toBe(4);

    const record = await ended(sim, workflowId);
    expect(record.startRequest).toMatchObject({ workflowID: workflowId, goal: `goal of ${workflowId}` });
    expect(record.actionsSent).toBe(4);
    expect(record.actionResponses).toHaveLength(2);
    expect(record.actionResponses[0]).toMatchObject({
      kind: 'runHTTPRequest',
      requestID: http.requestID,
      response: { httpResponse: { statusCode: 201, body: '{"id":7}', headers: { 'content-type': 'application/json' } } },
    });
    expect(record.actionResponses[1]).toMatchObject({
      kind: 'runReadFile',
      requestID: refused.requestID,
      response: { plainTextResponse: { error: 'action cannot be executed by this client: runReadFile' } },
    });
    expect(record.ended).toMatchObject({ how: 'ok' });
    expect(record.stopReasons).toEqual([]);
  });

  it('sends an http request without a body when the step has none', async () => {
    const { call, workflowId } = start(client, [{ op: 'http', path: '/api/v4/echo' }]);
    const action = await call.action(0);
    expect(action.runHTTPRequest?.method).toBe('GET');
    expect(action.runHTTPRequest?.path).toBe('/api/v4/echo');
    expect(action.runHTTPRequest?.body).toBeUndefined();
    call.send({ actionResponse: { requestID: action.requestID ?? '', httpResponse: { statusCode: 200, body: '' } } });
    expect((await call.status).codeName).toBe('OK');
    expect(recordOf(sim, workflowId).actionResponses).toHaveLength(1);
  });

  it('plays mcp and every unsupported kind with a payload the contract can carry', async () => {
    const { call, workflowId } = start(client, [
      { op: 'mcp', name: 'search', args: '{"q":"x"}' },
      { op: 'unsupported', kind: 'runCommand' },
      { op: 'unsupported', kind: 'runGitCommand' },
      { op: 'unsupported', kind: 'runShellCommand' },
      { op: 'unsupported', kind: 'listDirectory' },
      { op: 'unsupported', kind: 'mkdir' },
    ]);
    const kinds: string[] = [];
    for (let i = 0; i < 6; i++) {
      const action = await call.action(i);
      kinds.push(action.action ?? '');
      call.send({ actionResponse: { requestID: action.requestID ?? '', plainTextResponse: { error: `refused ${action.action}` } } });
    }
    expect(kinds).toEqual(['runMCPTool', 'runCommand', 'runGitCommand', 'runShellCommand', 'listDirectory', 'mkdir']);
    expect(call.actions[0]?.runMCPTool).toEqual({ name: 'search', args: '{"q":"x"}' });
    expect((await call.status).codeName).toBe('OK');
    const record = await ended(sim, workflowId);
    expect(record.actionResponses.map((r) => r.kind)).toEqual(kinds);
    expect(record.actionResponses[0]?.response.plainTextResponse?.error).toBe('refused runMCPTool');
  });

  it('plays the default scenario (one checkpoint, then end) without workflowMetadata', async () => {
    const { call, workflowId } = start(client, undefined);
    expect((await call.status).codeName).toBe('OK');
    expect(call.actions).toHaveLength(1);
    expect(call.actions[0]?.newCheckpoint?.checkpoint).toBe('done');
    expect(recordOf(sim, workflowId).ended?.how).toBe('ok');
  });

  it('runs repeat and wait steps in order', async () => {
    const began = Date.now();
    const { call } = start(client, [
      {
        op: 'repeat',
        times: 3,
        steps: [
          { op: 'checkpoint', text: 'tick' },
          { op: 'wait', ms: 10 },
        ],
      },
      { op: 'checkpoint', text: 'last' },
    ]);
    expect((await call.status).codeName).toBe('OK');
    expect(call.actions.map((a) => a.newCheckpoint?.checkpoint)).toEqual(['tick', 'tick', 'tick', 'last']);
    expect(Date.now() - began).toBeGreaterThanOrEqual(25);
  });

  it('fails with INVALID_ARGUMENT before any action', async () => {
    const { call, workflowId } = start(client, [{ op: 'fail', code: 'INVALID_ARGUMENT', message: 'goal is required' }]);
    expect(await call.status).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: 'goal is required' });
    expect(call.actions).toEqual([]);
    expect((await ended(sim, workflowId)).ended).toMatchObject({ how: 'status', code: 'INVALID_ARGUMENT' });
  });

  it('fails with RESOURCE_EXHAUSTED USAGE_QUOTA_EXCEEDED after the first action', async () => {
    const { call, workflowId } = start(client, [
      { op: 'checkpoint', text: 'started' },
      { op: 'fail', code: 'RESOURCE_EXHAUSTED', message: 'USAGE_QUOTA_EXCEEDED: out of credits' },
    ]);
    const status = await call.status;
    expect(status.codeName).toBe('RESOURCE_EXHAUSTED');
    expect(status.details).toContain('USAGE_QUOTA_EXCEEDED');
    expect(call.actions).toHaveLength(1);
    expect((await ended(sim, workflowId)).ended).toMatchObject({ how: 'status', code: 'RESOURCE_EXHAUSTED' });
  });

  it('uses the code name as details when a fail step has no message', async () => {
    const { call } = start(client, [{ op: 'fail', code: 'UNAVAILABLE' }]);
    expect(await call.status).toMatchObject({ codeName: 'UNAVAILABLE', details: 'UNAVAILABLE' });
  });

  it('rejects a malformed scenario with INVALID_ARGUMENT and records the call', async () => {
    const workflowId = String(nextWorkflowId++);
    const call = client.open();
    call.send({ startRequest: { workflowID: workflowId, workflowMetadata: '{"scenario":[{"op":"explode"}]}' } });
    const status = await call.status;
    expect(status.codeName).toBe('INVALID_ARGUMENT');
    expect(status.details).toMatch(/bad scenario/);
    expect((await ended(sim, workflowId)).ended).toMatchObject({ how: 'status', code: 'INVALID_ARGUMENT' });
  });

  it('rejects workflowMetadata that is not JSON', async () => {
    const workflowId = String(nextWorkflowId++);
    const call = client.open();
    call.send({ startRequest: { workflowID: workflowId, workflowMetadata: 'not json' } });
    expect(await call.status).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: 'workflowMetadata is not JSON' });
  });

  it('rejects a call whose first event is not a startRequest, recording nothing', async () => {
    const before = sim.calls.length;
    const call = client.open();
    call.send({ heartbeat: { timestamp: '1' } });
    expect(await call.status).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: 'first event must be startRequest' });
    expect(sim.calls.length).toBe(before);
  });

  it('counts heartbeats', async () => {
    const { call, workflowId } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await call.action(0);
    call.send({ heartbeat: { timestamp: String(Date.now()) } });
    call.send({ heartbeat: { timestamp: String(Date.now()) } });
    await sim.waitFor(() => recordOf(sim, workflowId).heartbeats === 2, 2_000, 'two heartbeats');
    call.cancel();
    await ended(sim, workflowId);
  });

  it('records the request metadata', async () => {
    const { call, workflowId } = start(client, [{ op: 'end' }], {
      'x-gitlab-oauth-token': 'token-abc',
      'x-request-id': 'req-123',
      'x-gitlab-realm': 'saas',
    });
    expect((await call.status).codeName).toBe('OK');
    expect(recordOf(sim, workflowId).metadata).toMatchObject({
      'x-gitlab-oauth-token': 'token-abc',
      'x-request-id': 'req-123',
      'x-gitlab-realm': 'saas',
    });
  });

  it('ends OK when the client half-closes', async () => {
    const { call, workflowId } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await call.action(0);
    call.end();
    expect((await call.status).codeName).toBe('OK');
    expect((await ended(sim, workflowId)).ended?.how).toBe('ok');
  });

  it('records a cancelled call when the client cancels a hanging scenario', async () => {
    const { call, workflowId } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await call.action(0);
    await sleep(20);
    expect(recordOf(sim, workflowId).ended).toBeUndefined();
    expect(sim.openCalls).toBeGreaterThanOrEqual(1);
    call.cancel();
    expect((await call.status).codeName).toBe('CANCELLED');
    expect((await ended(sim, workflowId)).ended?.how).toBe('cancelled');
  });

  it('records a cancelled call when the client cancels while an action awaits its answer', async () => {
    const { call, workflowId } = start(client, [{ op: 'http', path: '/api/v4/slow' }, { op: 'checkpoint' }]);
    await call.action(0);
    call.cancel();
    const record = await ended(sim, workflowId);
    expect(record.ended?.how).toBe('cancelled');
    expect(record.actionResponses).toEqual([]);
    expect(record.actionsSent).toBe(1);
  });

  it('serves a long scenario of answered actions without piling listeners on the call', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => {
      warnings.push(`${warning.name}: ${warning.message}`);
    };
    process.on('warning', onWarning);
    try {
      const { call, workflowId } = start(client, [{ op: 'repeat', times: 25, steps: [{ op: 'http', path: '/api/v4/echo' }] }]);
      for (let i = 0; i < 25; i++) {
        const action = await call.action(i);
        call.send({ actionResponse: { requestID: action.requestID ?? '', httpResponse: { statusCode: 200 } } });
      }
      expect((await call.status).codeName).toBe('OK');
      expect(recordOf(sim, workflowId).actionResponses).toHaveLength(25);
      // Warnings are emitted on the next tick.
      await sleep(10);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
  });

  it('paginate follows headers["X-Next-Page"] by its exact name, as the real service does', async () => {
    const { call, workflowId } = start(client, [{ op: 'paginate', path: '/api/v4/projects/1/issues?state=opened', perPage: 2 }]);
    const pages: Array<{ next: string; items: number }> = [
      { next: '2', items: 2 },
      { next: '3', items: 2 },
      { next: '', items: 1 },
    ];
    for (const [i, page] of pages.entries()) {
      const action = await call.action(i);
      expect(action.runHTTPRequest).toMatchObject({ method: 'GET', path: `/api/v4/projects/1/issues?state=opened&page=${i + 1}&per_page=2` });
      call.send({
        actionResponse: {
          requestID: action.requestID ?? '',
          httpResponse: { statusCode: 200, headers: { 'X-Next-Page': page.next, 'X-Total': '5' }, body: JSON.stringify(Array.from({ length: page.items }, (_, n) => ({ n }))) },
        },
      });
    }
    expect((await call.status).codeName).toBe('OK');
    expect(recordOf(sim, workflowId).paginations).toEqual([{ path: '/api/v4/projects/1/issues?state=opened', pages: [1, 2, 3], items: 5, end: 'last_page' }]);
  });

  it('paginate stops after the first page when the header is spelled x-next-page (a lower-cased relay loses pages)', async () => {
    const { call, workflowId } = start(client, [
      { op: 'paginate', path: '/api/v4/projects/1/issues' },
      { op: 'checkpoint', text: 'after' },
    ]);
    const action = await call.action(0);
    call.send({ actionResponse: { requestID: action.requestID ?? '', httpResponse: { statusCode: 200, headers: { 'x-next-page': '2' }, body: '[1,2]' } } });
    expect((await call.action(1)).newCheckpoint?.checkpoint).toBe('after');
    expect((await call.status).codeName).toBe('OK');
    expect(recordOf(sim, workflowId).paginations).toEqual([{ path: '/api/v4/projects/1/issues', pages: [1], items: 2, end: 'last_page' }]);
  });

  it('paginate records an error answer and a page limit', async () => {
    const failing = start(client, [{ op: 'paginate', path: '/api/v4/projects/1/issues' }]);
    const first = await failing.call.action(0);
    failing.call.send({ actionResponse: { requestID: first.requestID ?? '', httpResponse: { error: 'request timed out' } } });
    expect((await failing.call.status).codeName).toBe('OK');
    expect(recordOf(sim, failing.workflowId).paginations[0]).toMatchObject({ pages: [1], end: 'error' });

    const endless = start(client, [{ op: 'paginate', path: '/api/v4/projects/1/issues', maxPages: 2 }]);
    for (let i = 0; i < 2; i++) {
      const action = await endless.call.action(i);
      endless.call.send({ actionResponse: { requestID: action.requestID ?? '', httpResponse: { statusCode: 200, headers: { 'X-Next-Page': String(i + 2) }, body: '[]' } } });
    }
    expect((await endless.call.status).codeName).toBe('OK');
    expect(recordOf(sim, endless.workflowId).paginations[0]).toMatchObject({ pages: [1, 2], end: 'max_pages' });
  });

  it('waitFor rejects after its timeout, naming what it waited for', async () => {
    await expect(sim.waitFor(() => false, 20, 'the impossible')).rejects.toThrow(/timed out after 20 ms waiting for the impossible/);
  });
});

describe('workflow simulator: upstream fidelity (agent_context_usage, every action kind, approvals, answer types)', () => {
  let sim: WorkflowServiceSimulator;
  let client: WorkflowTestClient;

  beforeAll(async () => {
    sim = await WorkflowServiceSimulator.start();
    client = new WorkflowTestClient(sim.address);
  });
  afterAll(async () => {
    client.close();
    await sim.close();
  });

  /** The answer a correct client gives each kind: the response type the service reads for it. */
  function answer(action: Action): ActionResponse {
    const requestID = action.requestID ?? '';
    if (action.action === 'runHTTPRequest') return { requestID, httpResponse: { statusCode: 200, body: 'ok' } };
    if (action.action === 'scheduleNotification') return { requestID, scheduleNotificationResponse: { accepted: false, reason: 'no' } };
    return { requestID, plainTextResponse: { error: `refused ${action.action}` } };
  }

  it('checkpoints carry errors and agent_context_usage: given, by default one agent named after the flow, or none', async () => {
    const workflowId = String(nextWorkflowId++);
    const call = client.open();
    call.send({
      startRequest: {
        workflowID: workflowId,
        workflowDefinition: 'software_development',
        workflowMetadata: scenarioMetadata([
          { op: 'checkpoint', text: 'a', errors: ['e1', 'e2'], usage: { planner: { total_tokens: 12, max_tokens: 100 } } },
          { op: 'checkpoint', text: 'b' },
          { op: 'checkpoint', text: 'c', usage: {} },
        ]),
      },
    });
    expect((await call.status).codeName).toBe('OK');
    expect(call.actions.map((a) => a.newCheckpoint)).toEqual([
      { status: 'RUNNING', checkpoint: 'a', goal: '', errors: ['e1', 'e2'], agent_context_usage: { planner: { total_tokens: 12, max_tokens: 100 } } },
      { status: 'RUNNING', checkpoint: 'b', goal: '', agent_context_usage: { software_development: { total_tokens: 2_000, max_tokens: 200_000 } } },
      { status: 'RUNNING', checkpoint: 'c', goal: '' },
    ]);
  });

  it('every_action payloads set every field of every action kind the contract has', () => {
    expect(Object.keys(everyActionPayload)).toEqual([...actionKinds]);
    for (const kind of actionKinds) {
      const type = (messageTypes.Action.fields[kind] as protobuf.Field).resolvedType as protobuf.Type;
      const payload = everyActionPayload[kind];
      for (const field of type.fieldsArray) {
        const value = payload[field.name];
        expect(value, `${kind}.${field.name}`).toBeTruthy();
        if (Array.isArray(value) || (typeof value === 'object' && value !== null)) expect(Object.keys(value).length, `${kind}.${field.name}`).toBeGreaterThan(0);
      }
      expect(Object.keys(payload).sort(), kind).toEqual(type.fieldsArray.map((f) => f.name).sort());
    }
  });

  it('every_action sends each kind in field-number order with every field, awaits each answer and records it', async () => {
    const { call, workflowId } = start(client, [{ op: 'every_action' }]);
    for (let i = 0; i < actionKinds.length; i++) {
      const action = await call.action(i);
      expect(action.action).toBe(actionKinds[i]);
      if (action.action !== 'newCheckpoint') call.send({ actionResponse: answer(action) });
    }
    expect((await call.status).codeName).toBe('OK');
    for (const action of call.actions) {
      const kind = action.action as (typeof actionKinds)[number];
      const received = action[kind] as Record<string, unknown>;
      // Everything sent arrives (proto-loader adds `_timeout`-style presence markers only).
      expect(received, kind).toMatchObject(everyActionPayload[kind]);
    }
    const record = await ended(sim, workflowId);
    expect(record.actionResponses.map((r) => r.kind)).toEqual(actionKinds.filter((k) => k !== 'newCheckpoint'));
    expect(record.actionResponses.find((r) => r.kind === 'scheduleNotification')?.response.scheduleNotificationResponse).toEqual({ accepted: false, reason: 'no' });
    expect(record.protocolErrors).toEqual([]);
  });

  it.each([
    [{ op: 'action', action: { scheduleNotification: { task_id: 't' } } }, 'scheduleNotification #1 answered with plainTextResponse, expected scheduleNotificationResponse'],
    [{ op: 'http', path: '/api/v4/echo' }, 'runHTTPRequest #1 answered with plainTextResponse, expected httpResponse'],
    [{ op: 'mcp', name: 'search' }, 'runMCPTool #1 answered with httpResponse, expected plainTextResponse'],
  ] satisfies Array<[Step, string]>)('fails the call INVALID_ARGUMENT on an answer of the wrong type for its action (%j), and records it', async (step, error) => {
    const { call, workflowId } = start(client, [step, { op: 'checkpoint', text: 'never' }]);
    const action = await call.action(0);
    const wrong: ActionResponse =
      action.action === 'runMCPTool'
        ? { requestID: action.requestID ?? '', httpResponse: { statusCode: 200 } }
        : { requestID: action.requestID ?? '', plainTextResponse: { error: 'no' } };
    call.send({ actionResponse: wrong });
    expect(await call.status).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: error });
    expect(call.actions).toHaveLength(1);
    const record = await ended(sim, workflowId);
    expect(record.protocolErrors).toEqual([error]);
    expect(record.actionResponses).toHaveLength(1);
    expect(record.ended).toMatchObject({ how: 'status', code: 'INVALID_ARGUMENT' });
  });

  it('an answer of the right type passes, an empty one included (what a wrong one is measured against)', async () => {
    const { call, workflowId } = start(client, [
      { op: 'action', action: { scheduleNotification: { task_id: 't' } } },
      { op: 'http', path: '/api/v4/echo' },
      { op: 'unsupported', kind: 'grep' },
    ]);
    for (let i = 0; i < 3; i++) call.send({ actionResponse: answer(await call.action(i)) });
    expect((await call.status).codeName).toBe('OK');
    expect((await ended(sim, workflowId)).protocolErrors).toEqual([]);
  });

  it.each([
    ['never sent', (first: Action): string => String(Number(first.requestID) + 41)],
    ['empty', (): string => ''],
  ])('fails the call INVALID_ARGUMENT on an answer whose requestID names no pending action (%s)', async (_what, idOf) => {
    const { call, workflowId } = start(client, [{ op: 'http', path: '/api/v4/echo' }, { op: 'checkpoint' }]);
    const first = await call.action(0);
    const stray = idOf(first);
    call.send({ actionResponse: { requestID: stray, httpResponse: { statusCode: 200 } } });
    const error = `actionResponse #${stray} names no pending action`;
    expect(await call.status).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: error });
    const record = await ended(sim, workflowId);
    expect(record.protocolErrors).toEqual([error]);
    expect(record.actionResponses).toEqual([]);
  });

  it('a second answer to the same action, or an answer to a checkpoint, names no pending action', async () => {
    const twice = start(client, [{ op: 'http', path: '/api/v4/echo' }, { op: 'hang' }]);
    const http = await twice.call.action(0);
    twice.call.send({ actionResponse: answer(http) });
    twice.call.send({ actionResponse: answer(http) });
    expect(await twice.call.status).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: `actionResponse #${http.requestID} names no pending action` });
    expect((await ended(sim, twice.workflowId)).actionResponses).toHaveLength(1);

    const checkpointed = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    const checkpoint = await checkpointed.call.action(0);
    checkpointed.call.send({ actionResponse: { requestID: checkpoint.requestID ?? '', plainTextResponse: {} } });
    expect(await checkpointed.call.status).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: `actionResponse #${checkpoint.requestID} names no pending action` });
  });

  it('answerWithinMs: an action unanswered that long fails the call DEADLINE_EXCEEDED; a late answer changes nothing', async () => {
    const { call, workflowId } = start(client, [
      { op: 'http', path: '/api/v4/echo', answerWithinMs: 150 },
      { op: 'checkpoint', text: 'never' },
    ]);
    const began = Date.now();
    const action = await call.action(0);
    const status = await call.status;
    expect(Date.now() - began).toBeGreaterThanOrEqual(140);
    expect(status).toMatchObject({ codeName: 'DEADLINE_EXCEEDED', details: `runHTTPRequest #${action.requestID} unanswered after 150 ms` });
    call.send({ actionResponse: answer(action) });
    const record = await ended(sim, workflowId);
    await sleep(30);
    expect(record.protocolErrors).toEqual([`runHTTPRequest #${action.requestID} unanswered after 150 ms`]);
    expect(record.actionResponses).toEqual([]);
    expect(record.ended).toMatchObject({ how: 'status', code: 'DEADLINE_EXCEEDED' });
  });

  it('answerWithinMs: each answer in time passes (every_action, paginate, turn), and without it the service waits', async () => {
    const { call, workflowId } = start(client, [
      { op: 'every_action', answerWithinMs: 2_000 },
      { op: 'paginate', path: '/api/v4/items', answerWithinMs: 2_000 },
      { op: 'turn', checkpoints: 1, write: { path: '/api/v4/echo' }, answerWithinMs: 2_000 },
      { op: 'http', path: '/api/v4/slow' },
    ]);
    for (let i = 0; ; i++) {
      const action = await call.action(i);
      if (action.runHTTPRequest?.path === '/api/v4/slow') {
        await sleep(300);
        call.send({ actionResponse: answer(action) });
        break;
      }
      if (action.action !== 'newCheckpoint') call.send({ actionResponse: answer(action) });
    }
    expect((await call.status).codeName).toBe('OK');
    expect((await ended(sim, workflowId)).protocolErrors).toEqual([]);
  });

  it.each([0, 3_600_001, 1.5])('rejects answerWithinMs %j as a bad scenario', async (ms) => {
    const { call } = start(client, [{ op: 'http', path: '/x', answerWithinMs: ms }]);
    expect((await call.status).codeName).toBe('INVALID_ARGUMENT');
    expect(call.actions).toEqual([]);
  });

  it('action sends a protojson Action (proto or JSON names) with its own requestID; a checkpoint is not awaited', async () => {
    const { call, workflowId } = start(client, [
      { op: 'action', action: { requestID: 'ignored', newCheckpoint: { status: 'S', agent_context_usage: { a: { totalTokens: 7 } } } } },
      { op: 'action', action: { runReadFile: { filepath: 'f', limit: 3 } } },
    ]);
    const checkpoint = await call.action(0);
    expect(checkpoint).toMatchObject({ requestID: '1', newCheckpoint: { status: 'S', agent_context_usage: { a: { total_tokens: 7 } } } });
    const read = await call.action(1);
    expect(read).toMatchObject({ requestID: '2', runReadFile: { filepath: 'f', limit: '3' } });
    call.send({ actionResponse: answer(read) });
    expect((await call.status).codeName).toBe('OK');
    expect((await ended(sim, workflowId)).actionResponses.map((r) => r.kind)).toEqual(['runReadFile']);
  });

  describe('the client step: an action whose answer is checked', () => {
    /** Plays one client step, answers its action with `response` and returns the call's status and record. */
    async function play(
      step: Extract<Step, { op: 'client' }>,
      response: ActionResponseMember,
    ): Promise<{ status: Awaited<WorkflowTestCall['status']>; record: CallRecord; action: Action }> {
      const { call, workflowId } = start(client, [step, { op: 'checkpoint', text: 'after' }]);
      const action = await call.action(0);
      call.send({ actionResponse: { requestID: action.requestID ?? '', ...response } });
      const status = await call.status;
      return { status, record: await ended(sim, workflowId), action };
    }

    it('sends the protojson action and, on a matching answer, records it and goes on', async () => {
      const { status, record, action } = await play(
        { op: 'client', action: { runReadFile: { filepath: 'a.ts' } }, expect: { plainTextResponse: { response: 'contents' } } },
        { plainTextResponse: { response: 'contents', error: '' } },
      );
      expect(action).toMatchObject({ requestID: '1', runReadFile: { filepath: 'a.ts' } });
      expect(status.codeName).toBe('OK');
      expect(record.actionResponses).toHaveLength(1);
      expect(record.actionResponses[0]).toMatchObject({ kind: 'runReadFile', requestID: '1', response: { requestID: '1', plainTextResponse: { response: 'contents' } } });
      expect(record.actionsSent).toBe(2);
      expect(record.protocolErrors).toEqual([]);
    });

    it('a subset match ignores fields expect does not name; zero values are read as the wire carries them', async () => {
      const subset = await play(
        { op: 'client', action: { runHTTPRequest: { path: '/p' } }, expect: { httpResponse: { statusCode: 200, headers: { a: '1' } } } },
        { httpResponse: { statusCode: 200, headers: { a: '1' }, body: 'extra' } },
      );
      expect(subset.status.codeName).toBe('OK');
      const zero = await play(
        { op: 'client', action: { grep: { pattern: 'x' } }, expect: { plainTextResponse: { response: '', error: 'refused' } }, exact: true },
        { plainTextResponse: { error: 'refused' } },
      );
      expect(zero.status.codeName).toBe('OK');
    });

    it('without expect only the answer type is checked', async () => {
      const { status } = await play({ op: 'client', action: { mkdir: { directory_path: 'd' } } }, { plainTextResponse: { response: 'anything' } });
      expect(status.codeName).toBe('OK');
    });

    it.each([
      ['another value', { plainTextResponse: { response: 'other' } }, {}],
      ['a missing field', { plainTextResponse: { error: 'contents' } }, {}],
      ['an extra field with exact', { plainTextResponse: { response: 'contents', error: 'and an error' } }, { exact: true }],
    ])('fails the call INVALID_ARGUMENT "unexpected answer to <kind> #<id>" on %s, recording the answer', async (_what, response, options) => {
      const { status, record } = await play(
        { op: 'client', action: { runReadFile: { filepath: 'a.ts' } }, expect: { plainTextResponse: { response: 'contents' } }, ...options },
        response,
      );
      expect(status).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: 'unexpected answer to runReadFile #1' });
      expect(record.actionResponses).toHaveLength(1);
      expect(record.actionResponses[0]?.response).toMatchObject(response);
      expect(record.protocolErrors).toHaveLength(1);
      expect(record.protocolErrors[0]).toMatch(/^unexpected answer to runReadFile #1: /);
      expect(record.actionsSent).toBe(1);
    });

    it('a map is matched as an object: the keys expect names, with their values', async () => {
      const { status } = await play(
        { op: 'client', action: { runHTTPRequest: { path: '/p' } }, expect: { httpResponse: { headers: { a: '1' } } } },
        { httpResponse: { headers: { a: '1', b: '2' } } },
      );
      expect(status.codeName).toBe('OK');
      const { status: missing } = await play(
        { op: 'client', action: { runHTTPRequest: { path: '/p' } }, expect: { httpResponse: { headers: { a: '1', c: '3' } } } },
        { httpResponse: { headers: { a: '1', b: '2' } } },
      );
      expect(missing).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: 'unexpected answer to runHTTPRequest #1' });
    });

    it('the type check comes first: a wrong answer type fails as such', async () => {
      const { status } = await play(
        { op: 'client', action: { runHTTPRequest: { path: '/p' } }, expect: { httpResponse: { statusCode: 200 } } },
        { plainTextResponse: { response: 'x' } },
      );
      expect(status).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: 'runHTTPRequest #1 answered with plainTextResponse, expected httpResponse' });
    });

    it.each([
      [{ op: 'client', action: { newCheckpoint: { status: 'S' } } }, /bad scenario: a client step needs an action that is answered/],
      [{ op: 'client', action: {} }, /bad scenario: a client step names no action kind/],
    ] satisfies Array<[Step, RegExp]>)('rejects %j as a bad scenario (INVALID_ARGUMENT)', async (step, details) => {
      const { call } = start(client, [step]);
      const status = await call.status;
      expect(status.codeName).toBe('INVALID_ARGUMENT');
      expect(status.details).toMatch(details);
    });

    it.each([
      [{ plainTextResponse: { response: 7 } }, /^bad scenario: expect is not an ActionResponse: plainTextResponse\.response/],
      [{ plain_text_response: { response: 'x' } }, /^bad scenario: expect names plain_text_response, no field of ActionResponse$/],
      [{ plainTextResponse: { text: 'x' } }, /^bad scenario: expect names plainTextResponse\.text, no field of ActionResponse$/],
    ])('an expect that is no ActionResponse (%j) is a bad scenario, found when the answer arrives', async (expectation, details) => {
      const { call } = start(client, [{ op: 'client', action: { runReadFile: {} }, expect: expectation }]);
      const action = await call.action(0);
      call.send({ actionResponse: answer(action) });
      const status = await call.status;
      expect(status.codeName).toBe('INVALID_ARGUMENT');
      expect(status.details).toMatch(details);
    });
  });

  describe("a turn's client action: one per step, checked, resumed with the turn", () => {
    const turnStep = (checkpoints: number): Step => ({
      op: 'turn',
      checkpoints,
      client: { action: { runReadFile: { filepath: 'step-{step}.txt' } }, expect: { plainTextResponse: { response: 'read step-{step}.txt' } } },
    });
    const fileOf = (action: Action): unknown => (action.runReadFile as { filepath?: string } | undefined)?.filepath;
    const read = (action: Action): ActionResponse => ({ requestID: action.requestID ?? '', plainTextResponse: { response: `read ${String(fileOf(action))}` } });

    it('each step sends the action with its number, awaits the right answer, then checkpoints; the next call goes on after the last checkpoint', async () => {
      const { call, workflowId } = start(client, [turnStep(3)]);
      expect(await call.action(0)).toMatchObject({ requestID: '1', runReadFile: { filepath: 'step-1.txt' } });
      call.send({ actionResponse: read(call.actions[0] as Action) });
      expect(await call.action(1)).toMatchObject({ newCheckpoint: { checkpoint: 'step 1/3', status: 'RUNNING' } });
      expect(await call.action(2)).toMatchObject({ runReadFile: { filepath: 'step-2.txt' } });
      // Cut with step 2's action unanswered: the next call of the workflow sends step 2 again.
      call.cancel();
      await ended(sim, workflowId);
      const next = client.open();
      next.send({ startRequest: { workflowID: workflowId, goal: '', workflowMetadata: scenarioMetadata([turnStep(3)]) } });
      for (const [n, file] of [
        [0, 'step-2.txt'],
        [2, 'step-3.txt'],
      ] as const) {
        const action = await next.action(n);
        expect(fileOf(action)).toBe(file);
        next.send({ actionResponse: read(action) });
      }
      expect((await next.status).codeName).toBe('OK');
      const [first, second] = sim.callsFor(workflowId);
      expect(first?.turn).toMatchObject({ from: 0, to: 1 });
      expect(second?.turn).toMatchObject({ from: 1, to: 3 });
      expect(second?.actionResponses.map((r) => r.response.plainTextResponse?.response)).toEqual(['read step-2.txt', 'read step-3.txt']);
      expect(second?.protocolErrors).toEqual([]);
    });

    it("an answer for another step's action fails the call INVALID_ARGUMENT, and the step is not checkpointed", async () => {
      const { call, workflowId } = start(client, [turnStep(2)]);
      const action = await call.action(0);
      call.send({ actionResponse: { requestID: action.requestID ?? '', plainTextResponse: { response: 'read step-2.txt' } } });
      expect(await call.status).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: 'unexpected answer to runReadFile #1' });
      const record = await ended(sim, workflowId);
      expect(record.turn).toMatchObject({ from: 0, to: 0 });
      expect(call.actions).toHaveLength(1);
    });
  });

  it.each([
    [{ grep: { case_insensitive: 'yes' } }, /bad scenario: grep\.case_insensitive: expected a boolean/],
    [{ somethingNew: {} }, /bad scenario: an action step names no action kind/],
  ])('ends a call whose action step is not an Action (%j) with INVALID_ARGUMENT', async (action, details) => {
    const { call } = start(client, [{ op: 'action', action }]);
    const status = await call.status;
    expect(status.codeName).toBe('INVALID_ARGUMENT');
    expect(status.details).toMatch(details);
  });

  it('records the approval of the start request, approval_source and policy_ref included', async () => {
    const workflowId = String(nextWorkflowId++);
    const call = client.open();
    const approval = {
      remember_approval: false,
      tool_name: 'run_command',
      tool_args_json: '{"cmd":"ls"}',
      approval_source: 'APPROVAL_SOURCE_PREAPPROVED_CONFIG',
      policy_ref: { origin: 'project', file: '.gitlab/duo/agent-config.yml', hash: 'sha256:ab', version: '3' },
    } as const;
    call.send({ startRequest: { workflowID: workflowId, workflowMetadata: scenarioMetadata([{ op: 'end' }]), approval: { approval } } });
    expect((await call.status).codeName).toBe('OK');
    expect(recordOf(sim, workflowId).approval).toMatchObject(approval);
  });
});

describe('workflow simulator: stop handshake', () => {
  let sim: WorkflowServiceSimulator;
  let client: WorkflowTestClient;

  beforeAll(async () => {
    sim = await WorkflowServiceSimulator.start();
    client = new WorkflowTestClient(sim.address);
  });
  afterAll(async () => {
    client.close();
    await sim.close();
  });

  it('acknowledges WORKHORSE_SERVER_SHUTDOWN by ending the call UNAVAILABLE; the workflow stays resumable', async () => {
    const { call, workflowId } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await call.action(0);
    call.send({ stopWorkflow: { reason: 'WORKHORSE_SERVER_SHUTDOWN' } });
    const status = await call.status;
    expect(status.codeName).toBe('UNAVAILABLE');
    expect(status.details).toContain('workflow execution interrupted');
    const record = await ended(sim, workflowId);
    expect(record.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    expect(record.stopReceivedAt).toHaveLength(1);
    expect(record.ended).toMatchObject({ how: 'status', code: 'UNAVAILABLE' });
    expect(sim.stoppedWorkflows.has(workflowId)).toBe(false);
  });

  it('ends the call OK for WORKHORSE_WEBSOCKET_PING_FAILED, the other word on the public allowlist: the workflow stays resumable', async () => {
    const { call, workflowId } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await call.action(0);
    call.send({ stopWorkflow: { reason: 'WORKHORSE_WEBSOCKET_PING_FAILED' } });
    expect((await call.status).codeName).toBe('OK');
    expect((await ended(sim, workflowId)).ended?.how).toBe('ok');
    expect(sim.stoppedWorkflows.has(workflowId)).toBe(false);
    const resumed = client.open();
    resumed.send({ startRequest: { workflowID: workflowId, goal: '', workflowMetadata: scenarioMetadata([{ op: 'end' }]) } });
    expect((await resumed.status).codeName).toBe('OK');
  });

  it.each(['WORKHORSE_RUN_LIMIT', 'WORKHORSE_LOCK_LOST', 'WORKHORSE_WEBSOCKET_PONG_TIMEOUT', 'USER_STOP', 'cancelled by the user'])(
    'treats %j (off the public allowlist) as a user stop: the call ends OK, the workflow is stopped, a resume of it is refused INVALID_ARGUMENT and a start with a goal runs',
    async (reason) => {
      const { call, workflowId } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
      await call.action(0);
      call.send({ stopWorkflow: { reason } });
      expect((await call.status).codeName).toBe('OK');
      const record = await ended(sim, workflowId);
      expect(record.stopReasons).toEqual([reason]);
      expect(record.ended?.how).toBe('ok');
      expect(sim.stoppedWorkflows.has(workflowId)).toBe(true);

      for (const resume of [{ goal: '' }, {}]) {
        const refused = client.open();
        refused.send({ startRequest: { workflowID: workflowId, ...resume, workflowMetadata: scenarioMetadata([{ op: 'checkpoint' }, { op: 'end' }]) } });
        const status = await refused.status;
        expect(status).toMatchObject({ codeName: 'INVALID_ARGUMENT', details: `workflow ${workflowId} is stopped: it cannot be resumed` });
        expect(refused.actions).toEqual([]);
      }
      const renewed = client.open();
      renewed.send({ startRequest: { workflowID: workflowId, goal: 'a new prompt', workflowMetadata: scenarioMetadata([{ op: 'checkpoint' }, { op: 'end' }]) } });
      expect((await renewed.status).codeName).toBe('OK');
      expect(sim.stoppedWorkflows.has(workflowId)).toBe(false);
    },
  );

  it('serves a stop during a wait step', async () => {
    const { call, workflowId } = start(client, [{ op: 'checkpoint' }, { op: 'wait', ms: 60_000 }, { op: 'checkpoint' }]);
    await call.action(0);
    call.send({ stopWorkflow: { reason: 'WORKHORSE_SERVER_SHUTDOWN' } });
    expect((await call.status).codeName).toBe('UNAVAILABLE');
    expect(call.actions).toHaveLength(1);
    expect((await ended(sim, workflowId)).stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
  });

  it('serves a stop while an action awaits its answer', async () => {
    const { call, workflowId } = start(client, [{ op: 'http', path: '/api/v4/echo' }, { op: 'checkpoint' }]);
    await call.action(0);
    call.send({ stopWorkflow: { reason: 'USER_STOP' } });
    expect((await call.status).codeName).toBe('OK');
    const record = await ended(sim, workflowId);
    expect(record.actionsSent).toBe(1);
    expect(record.actionResponses).toEqual([]);
  });

  it('serves a stop sent right after the startRequest, before any action', async () => {
    const { call, workflowId } = start(client, [{ op: 'wait', ms: 60_000 }]);
    call.send({ stopWorkflow: { reason: 'WORKHORSE_SERVER_SHUTDOWN' } });
    expect((await call.status).codeName).toBe('UNAVAILABLE');
    expect(call.actions).toEqual([]);
    expect((await ended(sim, workflowId)).stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
  });
});

describe('workflow simulator: configurable stop behaviour', () => {
  const sims: WorkflowServiceSimulator[] = [];
  const clients: WorkflowTestClient[] = [];

  async function simulator(options: Parameters<typeof WorkflowServiceSimulator.start>[0]): Promise<{ sim: WorkflowServiceSimulator; client: WorkflowTestClient }> {
    const sim = await WorkflowServiceSimulator.start(options);
    sims.push(sim);
    const client = new WorkflowTestClient(sim.address);
    clients.push(client);
    return { sim, client };
  }

  afterEach(async () => {
    for (const client of clients.splice(0)) client.close();
    await Promise.all(sims.splice(0).map((sim) => sim.close()));
  });

  it('ignoreStops: records the stop, keeps the call open, and records the cancel that follows', async () => {
    const { sim, client } = await simulator({ ignoreStops: true });
    const { call, workflowId } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await call.action(0);
    call.send({ stopWorkflow: { reason: 'WORKHORSE_SERVER_SHUTDOWN' } });
    await sim.waitFor(() => recordOf(sim, workflowId).stopReasons.length === 1, 2_000, 'the stop');
    await sleep(50);
    expect(call.ended).toBeUndefined();
    expect(recordOf(sim, workflowId).ended).toBeUndefined();
    expect(sim.openCalls).toBe(1);

    call.cancel();
    expect((await call.status).codeName).toBe('CANCELLED');
    const record = await ended(sim, workflowId);
    expect(record.ended?.how).toBe('cancelled');
    expect(record.stopReasons).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    expect(sim.openCalls).toBe(0);
  });

  it('ignoreStops can be switched at run time', async () => {
    const { sim, client } = await simulator({});
    sim.ignoreStops = true;
    const { call, workflowId } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await call.action(0);
    call.send({ stopWorkflow: { reason: 'USER_STOP' } });
    await sim.waitFor(() => recordOf(sim, workflowId).stopReasons.length === 1, 2_000, 'the first stop');
    sim.ignoreStops = false;
    call.send({ stopWorkflow: { reason: 'USER_STOP' } });
    expect((await call.status).codeName).toBe('OK');
    expect((await ended(sim, workflowId)).stopReasons).toEqual(['USER_STOP', 'USER_STOP']);
  });

  it('a service that allowlists WORKHORSE_RUN_LIMIT ends its call OK and keeps the workflow resumable; WORKHORSE_LOCK_LOST, off its list, still stops the workflow', async () => {
    const { sim, client } = await simulator({ infraStopReasons: ['WORKHORSE_SERVER_SHUTDOWN', 'WORKHORSE_RUN_LIMIT'] });
    const limit = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await limit.call.action(0);
    limit.call.send({ stopWorkflow: { reason: 'WORKHORSE_RUN_LIMIT' } });
    expect((await limit.call.status).codeName).toBe('OK');
    expect(sim.stoppedWorkflows.has(limit.workflowId)).toBe(false);

    const lost = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await lost.call.action(0);
    lost.call.send({ stopWorkflow: { reason: 'WORKHORSE_LOCK_LOST' } });
    expect((await lost.call.status).codeName).toBe('OK');
    expect((await ended(sim, lost.workflowId)).ended).toMatchObject({ how: 'ok' });
    expect(sim.stoppedWorkflows.has(lost.workflowId)).toBe(true);
  });

  it('close() ends open calls promptly', async () => {
    const { sim, client } = await simulator({});
    const { call, workflowId } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await call.action(0);
    const began = Date.now();
    await sim.close();
    expect(Date.now() - began).toBeLessThan(1_000);
    expect(await call.status).toMatchObject({ codeName: 'UNAVAILABLE', details: 'workflow service shutting down' });
    expect(recordOf(sim, workflowId).ended).toMatchObject({ how: 'status', code: 'UNAVAILABLE' });
    expect(sim.openCalls).toBe(0);
    // Idempotent: the same promise, already settled.
    await sim.close();
  });

  it('maxConcurrentStreams: 2 serves concurrent calls', async () => {
    const { sim, client } = await simulator({ maxConcurrentStreams: 2 });
    const a = start(client, [
      { op: 'checkpoint', text: 'a' },
      { op: 'wait', ms: 30 },
    ]);
    const b = start(client, [
      { op: 'checkpoint', text: 'b' },
      { op: 'wait', ms: 30 },
    ]);
    await Promise.all([a.call.action(0), b.call.action(0)]);
    expect(sim.openCalls).toBe(2);
    expect((await a.call.status).codeName).toBe('OK');
    expect((await b.call.status).codeName).toBe('OK');
    // The server frees a stream slot only when the HTTP/2 stream closes, a moment after the
    // client has read its status: until then a third stream is refused (RESOURCE_EXHAUSTED).
    let c = start(client, [{ op: 'checkpoint', text: 'c' }]);
    for (let attempt = 0; (await c.call.status).codeName === 'RESOURCE_EXHAUSTED' && attempt < 40; attempt++) {
      await sleep(50);
      c = start(client, [{ op: 'checkpoint', text: 'c' }]);
    }
    expect((await c.call.status).codeName).toBe('OK');
    expect(c.call.actions[0]?.newCheckpoint?.checkpoint).toBe('c');
    expect(sim.calls).toHaveLength(3);
  });
});

describe('workflow simulator: the TCP front (ping policy, black hole)', () => {
  const sims: WorkflowServiceSimulator[] = [];
  const clients: WorkflowTestClient[] = [];

  afterEach(async () => {
    for (const client of clients.splice(0)) client.close();
    await Promise.all(sims.splice(0).map((sim) => sim.close()));
  });

  async function fronted(pingPolicy: PingPolicy | undefined, keepaliveTimeMs: number): Promise<{ sim: WorkflowServiceSimulator; client: WorkflowTestClient }> {
    const sim = await WorkflowServiceSimulator.start({ front: { pingPolicy } });
    sims.push(sim);
    const client = new WorkflowTestClient(sim.address, { 'grpc.keepalive_time_ms': keepaliveTimeMs, 'grpc.keepalive_timeout_ms': 1_000 });
    clients.push(client);
    return { sim, client };
  }

  it('serves calls through the front on its own port', async () => {
    const { sim, client } = await fronted(undefined, 60_000);
    expect(sim.front?.port).toBe(sim.port);
    const { call } = start(client, [{ op: 'checkpoint', text: 'through' }, { op: 'end' }]);
    expect((await call.action(0)).newCheckpoint?.checkpoint).toBe('through');
    expect((await call.status).codeName).toBe('OK');
  });

  it("pings closer than the policy's interval, with no data in between, get GOAWAY too_many_pings and the call ends", async () => {
    // The real policy scaled down: 200 ms apart at least, 2 strikes; the client pings every 20 ms.
    const { sim, client } = await fronted({ minPingIntervalWithoutDataMs: 200, maxPingStrikes: 2 }, 20);
    const { call } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await call.action(0);
    const status = await Promise.race([call.status, sleep(5_000).then(() => undefined)]);
    expect(status?.codeName).not.toBe('OK');
    expect(status).toBeDefined();
    expect(sim.front?.goaways).toBe(1);
    expect(sim.front?.pingsReceived).toBeGreaterThanOrEqual(4);
  });

  it('pings spaced wider than the interval are never a strike', async () => {
    const { sim, client } = await fronted({ minPingIntervalWithoutDataMs: 100, maxPingStrikes: 2 }, 200);
    const { call } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await call.action(0);
    await sim.waitFor(() => (sim.front?.pingsReceived ?? 0) >= 4, 5_000, 'four pings');
    expect(call.ended).toBeUndefined();
    expect(sim.front?.goaways).toBe(0);
  });

  it('blackHole(): nothing passes any more and nothing is closed; only a keepalive timeout ends the call', async () => {
    const { sim, client } = await fronted(undefined, 100);
    const { call, workflowId } = start(client, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await call.action(0);
    sim.blackHole();
    const status = await Promise.race([call.status, sleep(5_000).then(() => undefined)]);
    expect(status).toMatchObject({ codeName: 'UNAVAILABLE' });
    // The service side never learnt: its call is still open.
    expect(recordOf(sim, workflowId).ended).toBeUndefined();
    expect(sim.front?.connections).toBe(1);
  });

  it('blackHole() needs the front', async () => {
    const sim = await WorkflowServiceSimulator.start();
    sims.push(sim);
    expect(() => sim.blackHole()).toThrow(/front/);
  });
});

interface TrackEvent {
  requestID?: string;
  workflowID?: string;
  featureQualifiedName?: string;
  featureAiCatalogItem?: boolean;
}

/** A bare grpc-js TrackSelfHostedExecuteWorkflow call, as Workhorse's cloud-service client opens it. */
class BillingTestCall {
  readonly answers: Array<{ requestID?: string }> = [];
  readonly status: Promise<{ codeName: string; details: string }>;
  private readonly stream: grpc.ClientDuplexStream<TrackEvent, { requestID?: string }>;

  constructor(client: grpc.Client, metadata: Record<string, string> = {}) {
    const method = duoWorkflowService['TrackSelfHostedExecuteWorkflow'] as grpc.MethodDefinition<TrackEvent, { requestID?: string }>;
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(metadata)) md.set(k, v);
    this.stream = client.makeBidiStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, md);
    this.stream.on('error', () => undefined);
    this.stream.on('data', (answer: { requestID?: string }) => this.answers.push(answer));
    this.status = new Promise((resolve) => this.stream.on('status', (s: grpc.StatusObject) => resolve({ codeName: grpc.status[s.code] ?? String(s.code), details: s.details })));
  }

  send(event: TrackEvent): void {
    this.stream.write(event);
  }

  end(): void {
    this.stream.end();
  }

  cancel(): void {
    this.stream.cancel();
  }
}

describe('workflow simulator: TrackSelfHostedExecuteWorkflow (self-hosted billing)', () => {
  const sims: WorkflowServiceSimulator[] = [];
  const clients: Array<{ close(): void }> = [];

  async function simulator(
    options: Parameters<typeof WorkflowServiceSimulator.start>[0] = {},
  ): Promise<{ sim: WorkflowServiceSimulator; client: WorkflowTestClient; billing: grpc.Client }> {
    const sim = await WorkflowServiceSimulator.start(options);
    sims.push(sim);
    const client = new WorkflowTestClient(sim.address);
    const billing = new grpc.Client(sim.address, grpc.credentials.createInsecure());
    clients.push(client, billing);
    return { sim, client, billing };
  }

  afterEach(async () => {
    for (const client of clients.splice(0)) client.close();
    await Promise.all(sims.splice(0).map((sim) => sim.close()));
  });

  /** Polls `predicate` (for what the client side received, which the simulator cannot signal). */
  async function until(predicate: () => boolean, what: string): Promise<void> {
    for (const began = Date.now(); !predicate(); await sleep(5)) if (Date.now() - began > 2_000) throw new Error(`timed out waiting for ${what}`);
  }

  const event = (requestID: string, workflowID = 'wf-1'): TrackEvent => ({ requestID, workflowID, featureQualifiedName: 'duo_chat', featureAiCatalogItem: true });

  it('records every event with the call metadata and answers each with its requestID; a half-close ends the call OK', async () => {
    const { sim, billing } = await simulator();
    const call = new BillingTestCall(billing, { 'x-gitlab-oauth-token': 'cloud-token' });
    call.send(event('1'));
    call.send({ requestID: '2', workflowID: 'wf-1' });
    await until(() => call.answers.length === 2, 'two answers');
    expect(call.answers).toEqual([{ requestID: '1' }, { requestID: '2' }]);
    const [record, ...more] = sim.billingCalls;
    expect(more).toEqual([]);
    expect(record?.metadata).toMatchObject({ 'x-gitlab-oauth-token': 'cloud-token' });
    expect(record?.events.map(({ at: _at, ...e }) => e)).toEqual([
      { requestID: '1', workflowID: 'wf-1', featureQualifiedName: 'duo_chat', featureAiCatalogItem: true },
      { requestID: '2', workflowID: 'wf-1', featureQualifiedName: '', featureAiCatalogItem: false },
    ]);
    expect(sim.openBillingCalls).toBe(1);
    call.end();
    expect((await call.status).codeName).toBe('OK');
    expect(record?.ended?.how).toBe('ok');
    expect(sim.openBillingCalls).toBe(0);
    // Billing calls are not workflow calls.
    expect(sim.calls).toEqual([]);
  });

  it('billing fail without afterEvents: the call fails with that status as it opens', async () => {
    const { sim, billing } = await simulator({ billing: { mode: 'fail', code: 'PERMISSION_DENIED', message: 'no cloud connector' } });
    const call = new BillingTestCall(billing);
    expect(await call.status).toEqual({ codeName: 'PERMISSION_DENIED', details: 'no cloud connector' });
    expect(sim.billingCalls[0]).toMatchObject({ events: [], answered: 0, ended: { how: 'status', code: 'PERMISSION_DENIED' } });
  });

  it('billing fail afterEvents: answers that many, then fails on the next event (recorded, not answered)', async () => {
    const { sim, billing } = await simulator({ billing: { mode: 'fail', code: 'UNAVAILABLE', afterEvents: 1 } });
    const call = new BillingTestCall(billing);
    call.send(event('1'));
    call.send(event('2'));
    expect(await call.status).toEqual({ codeName: 'UNAVAILABLE', details: 'UNAVAILABLE' });
    expect(call.answers).toEqual([{ requestID: '1' }]);
    expect(sim.billingCalls[0]).toMatchObject({ answered: 1, ended: { how: 'status', code: 'UNAVAILABLE' } });
    expect(sim.billingCalls[0]?.events.map((e) => e.requestID)).toEqual(['1', '2']);
  });

  it('billing hang: answers afterEvents events, then records and answers nothing, the call kept open; switchable at run time', async () => {
    const { sim, billing } = await simulator({ billing: { mode: 'hang', afterEvents: 1 } });
    const call = new BillingTestCall(billing);
    call.send(event('1'));
    call.send(event('2'));
    await sim.waitFor(() => sim.billingCalls[0]?.events.length === 2, 2_000, 'two events');
    await sleep(100);
    expect(call.answers).toEqual([{ requestID: '1' }]);
    expect(sim.billingCalls[0]?.ended).toBeUndefined();
    expect(sim.openBillingCalls).toBe(1);

    sim.billing = { mode: 'answer' };
    call.send(event('3'));
    await until(() => call.answers.length === 2, 'the third answered');
    call.cancel();
    expect((await call.status).codeName).toBe('CANCELLED');
    await sim.waitFor(() => sim.billingCalls[0]?.ended !== undefined, 2_000, 'the cancel');
    expect(sim.billingCalls[0]?.ended?.how).toBe('cancelled');
    expect(call.answers.map((a) => a.requestID)).toEqual(['1', '3']);
  });

  it('close() ends open billing calls UNAVAILABLE', async () => {
    const { sim, billing } = await simulator({ billing: { mode: 'hang' } });
    const call = new BillingTestCall(billing);
    call.send(event('1'));
    await sim.waitFor(() => sim.billingCalls[0]?.events.length === 1, 2_000, 'the event');
    await sim.close();
    expect(await call.status).toEqual({ codeName: 'UNAVAILABLE', details: 'workflow service shutting down' });
    expect(sim.billingCalls[0]?.ended).toMatchObject({ how: 'status', code: 'UNAVAILABLE' });
  });

  describe('the track_llm_call step', () => {
    it("sends trackLlmCallForSelfHosted (workflowID by default the call's) and goes on on a plainTextResponse; billed when the billing stream saw it first", async () => {
      const { sim, client, billing } = await simulator();
      const { call, workflowId } = start(client, [
        { op: 'track_llm_call', featureQualifiedName: 'duo_agent_platform', featureAiCatalogItem: true, expect: { plainTextResponse: {} }, exact: true },
        { op: 'track_llm_call', workflowID: 'other' },
        { op: 'checkpoint', text: 'after' },
      ]);
      // As Workhorse: forward the event on the billing stream, await its ack, answer an empty plainTextResponse.
      const tracking = new BillingTestCall(billing);
      const first = await call.action(0);
      expect(first).toMatchObject({
        requestID: '1',
        trackLlmCallForSelfHosted: { workflowID: workflowId, featureQualifiedName: 'duo_agent_platform', featureAiCatalogItem: true },
      });
      tracking.send({ requestID: first.requestID, ...first.trackLlmCallForSelfHosted });
      await sim.waitFor(() => sim.billingCalls[0]?.answered === 1, 2_000, 'the ack');
      call.send({ actionResponse: { requestID: first.requestID ?? '', plainTextResponse: {} } });
      // The second is answered without billing it.
      const second = await call.action(1);
      expect(second.trackLlmCallForSelfHosted).toMatchObject({ workflowID: 'other', featureQualifiedName: 'duo_chat' });
      expect(second.trackLlmCallForSelfHosted?.featureAiCatalogItem).toBeFalsy();
      call.send({ actionResponse: { requestID: second.requestID ?? '', plainTextResponse: {} } });
      expect((await call.action(2)).newCheckpoint?.checkpoint).toBe('after');
      expect((await call.status).codeName).toBe('OK');
      const record = await ended(sim, workflowId);
      expect(record.llmCalls).toEqual([
        { requestID: '1', workflowID: workflowId, billed: true },
        { requestID: '2', workflowID: 'other', billed: false },
      ]);
      expect(record.actionResponses.map((r) => r.kind)).toEqual(['trackLlmCallForSelfHosted', 'trackLlmCallForSelfHosted']);
      expect(record.protocolErrors).toEqual([]);
      tracking.end();
    });

    it.each([
      ['an httpResponse', { httpResponse: { statusCode: 200 } }, 'trackLlmCallForSelfHosted #1 answered with httpResponse, expected plainTextResponse'],
      ['an error where expect wants it empty', { plainTextResponse: { error: 'cannot bill' } }, 'unexpected answer to trackLlmCallForSelfHosted #1'],
    ])('fails the call INVALID_ARGUMENT on %s', async (_what, response, details) => {
      const { sim, client } = await simulator();
      const { call, workflowId } = start(client, [{ op: 'track_llm_call', expect: { plainTextResponse: {} }, exact: true }]);
      const action = await call.action(0);
      call.send({ actionResponse: { requestID: action.requestID ?? '', ...response } });
      expect(await call.status).toEqual(expect.objectContaining({ codeName: 'INVALID_ARGUMENT', details }));
      expect((await ended(sim, workflowId)).protocolErrors).toHaveLength(1);
    });

    it('answerWithinMs: unanswered (a billing stream that hangs, say) fails the call DEADLINE_EXCEEDED', async () => {
      const { client } = await simulator({ billing: { mode: 'hang' } });
      const { call } = start(client, [{ op: 'track_llm_call', answerWithinMs: 100 }]);
      await call.action(0);
      expect(await call.status).toMatchObject({ codeName: 'DEADLINE_EXCEEDED', details: 'trackLlmCallForSelfHosted #1 unanswered after 100 ms' });
    });
  });
});
