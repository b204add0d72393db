/**
 * Upstream fidelity through the real gateway (issue 9 points 3 and 4, issue 11 point 3):
 * HTTP in, gRPC to the workflow simulator, ndjson out, on loopback sockets. Each test
 * asserts what a real peer observes: what the service received, the bytes of each line.
 *
 *   contract / reflection   a body with every field set reaches the service unchanged but for
 *                           the owner-controlled fields; an Action with every field set comes
 *                           back as a line that decodes to it
 *   ndjson lines            byte-exact Workhorse lines (proto names, unpopulated fields)
 *   scheduleNotification    answered scheduleNotificationResponse{accepted:false, reason}
 *   approvals               approval_source and policy_ref arrive
 *   hostile bodies          10 000 levels → 400 INVALID_REQUEST; generated bodies → 2xx/4xx
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { SCHEDULE_NOTIFICATION_DECLINED } from '../../src/run/action-answers';
import { everyActionPayload } from '../../sandbox/every-action';
import { scenarioMetadata } from '../../sandbox/scenario';
import { actionKinds, messageTypes } from '../../src/workflow/contract';
import { decodeProtoJson, MAX_JSON_DEPTH } from '../../src/workflow/protojson';
import { hostileBody, nestedText } from '../helpers/hostile-json';
import { messageArbitrary, plainOf, toProtoJson, type Plain } from '../helpers/proto-arbitrary';
import { ndjsonLines, startStack, type Stack } from '../../stack';

/** Error codes a caller may see from an execute; anything else (INTERNAL above all) is a defect. */
const executeErrorCodes = new Set(['INVALID_REQUEST', 'WORKFLOW_SERVICE_UNAVAILABLE', 'USAGE_QUOTA_EXCEEDED', 'WORKFLOW_LOCKED']);

const owner = {
  detached: false,
  lockConcurrentFlow: false,
  serverCapabilities: ['tool_call_approval', 'owner_cap'],
  mcpServers: { tools: { URL: 'http://127.0.0.1:1/mcp', Tools: ['owner_tool'], PreApprovedTools: ['owner_tool'], Trusted: true } },
};

let stack: Stack;
let nextWorkflowId = 50_000;
const freshId = (): string => String(nextWorkflowId++);

beforeAll(async () => {
  stack = await startStack({ preauth: owner });
});
afterAll(async () => {
  await stack.close();
});

function linesOf(text: string): string[] {
  return ndjsonLines(text).filter((l) => l !== '');
}

describe('a StartWorkflowRequest with every field set crosses the gateway', () => {
  it('reaches the service unchanged but for workflowID, clientCapabilities, mcpTools and preapproved_tools', async () => {
    const metadata = scenarioMetadata([{ op: 'end' }]);
    await fc.assert(
      fc.asyncProperty(messageArbitrary(messageTypes.StartWorkflowRequest, { structDepth: 3 }), fc.integer(), fc.boolean(), async (generated, seed, sendId) => {
        const workflowId = freshId();
        const request = { ...generated, workflowMetadata: metadata, workflowID: workflowId };
        const body = toProtoJson(messageTypes.StartWorkflowRequest, request, seed) as Plain;
        if (!sendId) delete body['workflowID'];
        const res = await stack.executeText(workflowId, { rawBody: JSON.stringify(body) });
        expect(res.status, res.text).toBe(200);
        const [call] = stack.workflow.callsFor(workflowId);
        // The caller's tools are dropped; the owner's server is unreachable, so none of its
        // tools are offered (the turn still starts, as Workhorse's does): no tools at all.
        const untouched: Record<string, unknown> = { ...request };
        delete untouched['mcpTools'];
        delete untouched['preapproved_tools'];
        expect(plainOf(messageTypes.StartWorkflowRequest, call?.startRequest)).toEqual({ ...untouched, clientCapabilities: ['tool_call_approval'] });
      }),
      { numRuns: 15 },
    );
  });

  it('forwards approval_source and policy_ref: the service records the approval it resumes with', async () => {
    const workflowId = freshId();
    const approval = {
      tool_name: 'run_command',
      tool_args_json: '{"cmd":"make"}',
      remember_approval: true,
      approval_source: 'APPROVAL_SOURCE_PRETOOLUSE_HOOK',
      policy_ref: { origin: 'group', file: 'duo/policy.yml', hash: 'sha256:12', version: '7' },
    };
    const res = await stack.executeText(workflowId, { body: { goal: 'resume', workflowMetadata: scenarioMetadata([{ op: 'end' }]), approval: { approval } } });
    expect(res.status).toBe(200);
    expect(stack.workflow.callsFor(workflowId)[0]?.approval).toMatchObject(approval);
  });
});

describe('Actions come back as Workhorse writes them', () => {
  it('a checkpoint line is byte for byte the line Workhorse writes: proto names, errors and agent_context_usage always present', async () => {
    const workflowId = freshId();
    const res = await stack.executeText(workflowId, {
      body: {
        goal: 'lines',
        workflowMetadata: scenarioMetadata([
          { op: 'checkpoint', text: 'one' },
          { op: 'checkpoint', text: 'two', status: 'FINISHED', usage: {} },
        ]),
      },
    });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-ndjson');
    expect(linesOf(res.text)).toEqual([
      '{"requestID":"1","newCheckpoint":{"status":"RUNNING","checkpoint":"one","goal":"lines","errors":[],"agent_context_usage":{"chat":{"total_tokens":1000,"max_tokens":200000}}}}',
      '{"requestID":"2","newCheckpoint":{"status":"FINISHED","checkpoint":"two","goal":"lines","errors":[],"agent_context_usage":{}}}',
    ]);
  });

  it('a generated checkpoint with every field set comes back as a line that decodes to it', async () => {
    await fc.assert(
      fc.asyncProperty(messageArbitrary(messageTypes.Action, { choose: { action: 'newCheckpoint' } }), fc.integer(), async (action, seed) => {
        const workflowId = freshId();
        const step = { op: 'action' as const, action: toProtoJson(messageTypes.Action, action, seed) as Record<string, unknown> };
        const res = await stack.executeText(workflowId, { body: { workflowMetadata: scenarioMetadata([step]) } });
        expect(res.status).toBe(200);
        const lines = linesOf(res.text);
        expect(lines).toHaveLength(1);
        const parsed = JSON.parse(lines[0] ?? '') as Plain;
        // Proto names only, every NewCheckpoint field present.
        expect(Object.keys(parsed)).toEqual(['requestID', 'newCheckpoint']);
        expect(Object.keys(parsed['newCheckpoint'] as Plain)).toEqual(['status', 'checkpoint', 'goal', 'errors', 'agent_context_usage']);
        const decoded = decodeProtoJson(messageTypes.Action, parsed);
        expect(decoded).toEqual({ ...action, requestID: '1' });
      }),
      { numRuns: 10 },
    );
  });

  it('every action kind with every field set: answered as the service expects, scheduleNotification declined', async () => {
    const workflowId = freshId();
    const res = await stack.executeText(workflowId, { body: { goal: 'all', workflowMetadata: scenarioMetadata([{ op: 'every_action' }]) } });
    expect(res.status).toBe(200);
    expect(linesOf(res.text)).toEqual([
      '{"requestID":"7","newCheckpoint":{"status":"RUNNING","checkpoint":"{\\"channel_values\\":{\\"step\\":1}}","goal":"every action","errors":["tool failed once"],' +
        '"agent_context_usage":{"executor":{"total_tokens":5400,"max_tokens":200000},"planner":{"total_tokens":1200,"max_tokens":200000}}}}',
    ]);
    const [call] = stack.workflow.callsFor(workflowId);
    expect(call?.protocolErrors).toEqual([]);
    const answers = Object.fromEntries((call?.actionResponses ?? []).map((a) => [a.kind, a.response]));
    expect(Object.keys(answers)).toEqual(actionKinds.filter((k) => k !== 'newCheckpoint'));
    expect(answers['scheduleNotification']).toMatchObject({
      response_type: 'scheduleNotificationResponse',
      scheduleNotificationResponse: { accepted: false, reason: SCHEDULE_NOTIFICATION_DECLINED },
    });
    expect(answers['scheduleNotification']?.scheduleNotificationResponse?.fires_at).toBeUndefined();
    expect(answers['runHTTPRequest']?.httpResponse?.statusCode).toBe(200);
    expect(JSON.parse(answers['runHTTPRequest']?.httpResponse?.body ?? '{}')).toMatchObject({ method: 'POST', body: everyActionPayload.runHTTPRequest['body'] });
    expect(answers['runMCPTool']?.plainTextResponse?.error).toBe('mcp tool not available: search');
    for (const kind of [
      'runCommand',
      'runReadFile',
      'runWriteFile',
      'runGitCommand',
      'runEditFile',
      'listDirectory',
      'grep',
      'findFiles',
      'mkdir',
      'runReadFiles',
      'runShellCommand',
      'trackLlmCallForSelfHosted',
    ]) {
      expect(answers[kind]?.plainTextResponse?.error, kind).toBe(`action cannot be executed by this client: ${kind}`);
    }
  });
});

describe('no body reaches an unhandled exception', () => {
  it(`a flowConfig nested 10 000 levels is 400 INVALID_REQUEST naming the ${MAX_JSON_DEPTH}-level limit; nothing is opened`, async () => {
    const workflowId = freshId();
    const callsBefore = stack.workflow.calls.length;
    const res = await stack.executeText(workflowId, { rawBody: `{"goal":"deep","flowConfig":${nestedText(10_000, '1', 0xaaaa)}}` });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual({
      error: { code: 'INVALID_REQUEST', message: `request body is nested deeper than ${MAX_JSON_DEPTH} levels`, retryable: false },
    });
    expect(stack.workflow.calls.length).toBe(callsBefore);
    // The gateway is unharmed: the next execute of the same workflow runs.
    expect((await stack.executeText(workflowId)).status).toBe(200);
  });

  it('generated hostile bodies get 2xx or 4xx with a stable error code, never 500', async () => {
    await fc.assert(
      fc.asyncProperty(hostileBody, async (body) => {
        const res = await stack.executeText(freshId(), { rawBody: body });
        expect(res.status, res.text).toBeLessThan(500);
        if (res.status >= 400) {
          const error = (JSON.parse(res.text) as { error: { code: string } }).error;
          expect(executeErrorCodes.has(error.code), error.code).toBe(true);
        }
      }),
      { numRuns: 60 },
    );
    expect(stack.logs()).not.toMatch(/"reason":"INTERNAL"/);
  });
});
