/**
 * Rails' own server-side turns (ServerSideTurnWorker → ServerSideExecutionService) against
 * longrun's execute route. The owner never marks them `Detached`, so longrun answers them
 * as Workhorse's BuildHTTP does (workhorse/internal/ai_assist/duoworkflow/http_handler.go,
 * http_transport.go): application/x-ndjson over one chunked response, one protojson Action
 * per line and only checkpoints, an empty line as keepalive while the flow is quiet, the
 * status committed with the first line — a failure before it is a real status, after it
 * the stream just ends. The caller is test/helpers/server-side-caller.ts, written from the
 * Rails service: it takes any 2xx as success, maps 409/403/other to its error reasons, and
 * counts only lines of a 200 response.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { OWNER_OAUTH_TOKEN } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { SERVER_SIDE_CLIENT_TYPE, SERVER_SIDE_CLIENT_VERSION, serverSideTurn, type ServerSideTurn } from '../helpers/server-side-caller';
import { startStack, type Stack } from '../../stack';

let stack: Stack | undefined;

afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** What Rails' preauth answers for a server-side turn: blocking (no Detached), the lock when Rails asks for it. */
const RAILS_PREAUTH = { lockConcurrentFlow: true, serverCapabilities: ['advanced_search', 'tool_call_approval_source'] };
const USER_TOKEN = 'glpat-user-oauth-token';

async function turn(s: Stack, workflowId: string, steps: Step[], extra: Record<string, unknown> = {}): Promise<ServerSideTurn> {
  return serverSideTurn(s.url, {
    workflowId,
    token: USER_TOKEN,
    goal: 'answer the Slack thread',
    workflowDefinition: 'chat',
    projectId: 7,
    namespaceId: 3,
    rootNamespaceId: 1,
    extra: { flowConfigId: 'chat/v1', flowConfigSchemaVersion: 'v1', flowVersion: '1.2.0', workflowMetadata: scenarioMetadata(steps), ...extra },
  });
}

const lines = (body: string): string[] => body.split('\n').slice(0, -1);

describe('a server-side turn', () => {
  it('streams as BuildHTTP does: 200 application/x-ndjson, chunked, checkpoints only, one protojson Action a line, keepalive lines while quiet', async () => {
    stack = await startStack({ redis: 'own', preauth: RAILS_PREAUTH, env: { LONGRUN_KEEPALIVE_MS: '100', LONGRUN_LOG_LEVEL: 'warn' } });
    const steps: Step[] = [
      { op: 'checkpoint', text: 'reading the thread' },
      { op: 'http', method: 'GET', path: '/api/v4/projects/7' },
      { op: 'unsupported', kind: 'runReadFile' },
      { op: 'wait', ms: 450 },
      { op: 'checkpoint', text: 'answered', status: 'INPUT_REQUIRED' },
      { op: 'end' },
    ];
    const result = await turn(stack, '5301', steps);
    expect(result.status).toBe(200);
    expect(result.outcome).toEqual({ kind: 'success' });
    expect(result.headers['content-type']).toBe('application/x-ndjson');
    expect(result.headers['transfer-encoding']).toBe('chunked');
    expect(result.headers['content-length']).toBeUndefined();
    // The caller counted the two checkpoints as actions, and the quiet 450 ms as keepalives, not actions.
    expect(result.actions).toBe(2);
    expect(result.keepalives).toBeGreaterThanOrEqual(2);
    const written = lines(result.body);
    expect(written.filter((l) => l === '')).toHaveLength(result.keepalives);
    const actions = written.filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
    // Workhorse's marshaling: proto names, unpopulated fields emitted; nothing but newCheckpoint.
    expect(actions.map((a) => Object.keys(a).filter((k) => k !== 'requestID'))).toEqual([['newCheckpoint'], ['newCheckpoint']]);
    expect(actions[0]).toMatchObject({ requestID: expect.any(String), newCheckpoint: { checkpoint: 'reading the thread', errors: [], goal: 'answer the Slack thread' } });
    expect(actions[1]).toMatchObject({ newCheckpoint: { checkpoint: 'answered', status: 'INPUT_REQUIRED' } });
    // Rails' preauth got the request as Workhorse forwards it: method, path and query, the user's token, no body.
    const preauth = stack.owner.preauths.at(-1);
    expect(preauth?.method).toBe('POST');
    expect(preauth?.path).toBe(
      `/api/v4/ai/duo_workflows/workflows/5301/execute?project_id=7&namespace_id=3&root_namespace_id=1&workflow_definition=chat&client_type=${SERVER_SIDE_CLIENT_TYPE}`,
    );
    expect(preauth?.headers['authorization']).toBe(`Bearer ${USER_TOKEN}`);
    expect(preauth?.headers['gitlab-workhorse']).toMatch(/^longrun-/);
    expect(preauth?.body).toBe('');
    // The workflow service got the body's start, the workflow the owner authorized, and no client capability.
    const [call] = stack.workflow.callsFor('5301');
    expect(call?.startRequest).toMatchObject({
      workflowID: '5301',
      goal: 'answer the Slack thread',
      workflowDefinition: 'chat',
      clientVersion: SERVER_SIDE_CLIENT_VERSION,
      flowConfigId: 'chat/v1',
      flowConfigSchemaVersion: 'v1',
      flowVersion: '1.2.0',
      clientCapabilities: ['advanced_search'],
    });
    expect(call?.metadata['x-gitlab-oauth-token']).toBe(OWNER_OAUTH_TOKEN);
    expect(call?.ended?.how).toBe('ok');
    // The relay was answered by longrun on the caller's behalf, as BuildHTTP's runner does.
    expect(stack.owner.apiRequests.map((r) => r.path)).toEqual(['/api/v4/projects/7']);
  });

  it('a turn that ends before any checkpoint is an empty 200: success, and the workflow’s status decides', async () => {
    stack = await startStack({ redis: 'own', preauth: RAILS_PREAUTH, env: { LONGRUN_LOG_LEVEL: 'warn' } });
    const result = await turn(stack, '5302', [{ op: 'end' }]);
    expect(result).toMatchObject({ status: 200, outcome: { kind: 'success' }, actions: 0, keepalives: 0, body: '' });
    expect(result.headers['content-type']).toBe('application/x-ndjson');
  });

  it('a failure after the first line only ends the stream: the caller keeps its 200 and what it counted', async () => {
    stack = await startStack({ redis: 'own', preauth: RAILS_PREAUTH, env: { LONGRUN_LOG_LEVEL: 'warn' } });
    const result = await turn(stack, '5303', [
      { op: 'checkpoint', text: 'started' },
      { op: 'wait', ms: 50 },
      { op: 'fail', code: 'UNAVAILABLE', message: 'model overloaded' },
    ]);
    expect(result).toMatchObject({ status: 200, outcome: { kind: 'success' }, actions: 1 });
    expect(lines(result.body).filter((l) => l !== '')).toHaveLength(1);
  });

  describe('a failure before the first line is a real status, which the caller maps, counting nothing', () => {
    it.each<[string, (s: Stack, id: string) => Promise<void> | void, Step[], number, ServerSideTurn['outcome']]>([
      [
        'the lock held by another run: 409',
        async (s, id) => {
          s.owner.configure(id, { ...RAILS_PREAUTH, detached: true });
          const first = await turn(s, id, [{ op: 'checkpoint', text: 'holding' }, { op: 'hang' }]);
          expect(first.status).toBe(202);
          s.owner.configure(id, RAILS_PREAUTH);
        },
        [{ op: 'checkpoint', text: 'never' }, { op: 'end' }],
        409,
        { kind: 'error', reason: 'workflow_locked' },
      ],
      [
        'the quota exceeded: 403',
        () => undefined,
        [{ op: 'fail', code: 'RESOURCE_EXHAUSTED', message: 'USAGE_QUOTA_EXCEEDED: no credits' }],
        403,
        { kind: 'error', reason: 'forbidden' },
      ],
      [
        'Rails refusing (rate limit, a deleted workflow): its status',
        (s, id) => s.owner.configure(id, { deny: { status: 404, body: '{"message":"404 Workflow Not Found"}' } }),
        [{ op: 'end' }],
        404,
        { kind: 'error', reason: 'execute_workflow_failed' },
      ],
      [
        'the service rejecting the start: 400',
        () => undefined,
        [{ op: 'fail', code: 'INVALID_ARGUMENT', message: 'empty goal' }],
        400,
        { kind: 'error', reason: 'execute_workflow_failed' },
      ],
      ['the service unavailable: 502', () => undefined, [{ op: 'fail', code: 'UNAVAILABLE', message: 'down' }], 502, { kind: 'error', reason: 'execute_workflow_failed' }],
    ])('%s', async (_case, arrange, steps, status, outcome) => {
      stack = await startStack({ redis: 'own', preauth: RAILS_PREAUTH, env: { LONGRUN_LOG_LEVEL: 'warn', LONGRUN_KEEPALIVE_MS: '50' } });
      await arrange(stack, '5310');
      const result = await turn(stack, '5310', steps);
      expect(result.status).toBe(status);
      expect(result.outcome).toEqual(outcome);
      expect(result.actions).toBe(0);
      expect(result.keepalives).toBe(0);
      expect(result.headers['content-type']).not.toBe('application/x-ndjson');
    });
  });
});
