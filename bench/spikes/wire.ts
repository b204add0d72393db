/**
 * What goes over the wire in every spike, shared by the clients and the servers so that
 * each pair's variants send and receive the same bytes: the owner POST (a segment-end
 * shaped JSON body of ~570 bytes, a preauth-shaped JSON answer of ~320), the execute
 * request the gateway receives (~480 bytes), the Redis script, and the ExecuteWorkflow
 * messages.
 */
import type { Action, StartWorkflowRequest } from '../../src/workflow/contract';
import { gitlabWorkhorseHeader, userAgent } from '../../src/core/version';

export const HOST = '127.0.0.1';
/** Every per-call deadline in the spikes (the owner callback's and Redis command's default). */
export const TIMEOUT_MS = 2_000;
/** undici Pool connections, node:http maxSockets, raw-http connections: longrun's LONGRUN_OWNER_CONNECTIONS default. */
export const OWNER_CONNECTIONS = 256;

export const OWNER_PATH = '/api/v4/internal/ai/duo_workflows/workflows/1234567/segment_end';

/** A Workhorse-JWT-sized header value (the signer is not part of what is measured). */
const jwtLike = `eyJhbGciOiJIUzI1NiJ9.${'x'.repeat(120)}.${'y'.repeat(43)}`;

/** The owner request's headers, as OwnerClient.segmentEnd sends them (no Host, no Content-Length). */
export function ownerHeaders(requestId: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'gitlab-workhorse': gitlabWorkhorseHeader,
    'gitlab-workhorse-api-request': jwtLike,
    'x-request-id': requestId,
    'user-agent': userAgent,
  };
}

/** A segment-end body of about 570 bytes (JSON.stringify'd per call, as longrun does). */
export function ownerBody(n: number): string {
  return JSON.stringify({
    workflow_id: '1234567',
    run_id: `run-${n}-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d`,
    reason: 'finished',
    segment_duration_s: 12.5,
    actions: 7,
    in_flight: [
      { request_id: 'req-1-aaaaaaaaaaaaaaaa', kind: 'runHTTPRequest', sent_at: '2025-01-01T00:00:00.000Z', path: '/api/v4/projects/1/merge_requests' },
      { request_id: 'req-2-bbbbbbbbbbbbbbbb', kind: 'runMCPTool', sent_at: '2025-01-01T00:00:01.000Z', path: '' },
      { request_id: 'req-3-cccccccccccccccc', kind: 'runHTTPRequest', sent_at: '2025-01-01T00:00:02.000Z', path: '/api/v4/projects/1/issues' },
    ],
    ended_while_stopping: true,
  });
}

/** The owner's answer: preauth-shaped JSON, ~300 bytes. */
export const OWNER_ANSWER = JSON.stringify({
  DuoWorkflow: {
    Service: { URI: '127.0.0.1:50052', Secure: false, Headers: { 'x-gitlab-oauth-token': 'glpat-xxxxxxxxxxxxxxxxxxxx', 'x-gitlab-instance-id': 'spike' } },
    CloudServiceForSelfHosted: false,
    LockConcurrentFlow: true,
    Token: 'z'.repeat(64),
    WorkflowID: '1234567',
  },
});

export const EXECUTE_PATH = '/api/v4/ai/duo_workflows/workflows/1234567/execute';

/** The dispatcher's execute request body (a startRequest as protojson), about 480 bytes. */
export function executeBody(n: number): string {
  return JSON.stringify({
    startRequest: {
      workflowID: '1234567',
      goal: `spike goal ${n}: summarise the merge request and list the files it touches`,
      workflowMetadata: JSON.stringify({ extended_logging: false, is_team_member: false, git_url: 'https://gitlab.example.com/group/project.git', git_sha: 'a'.repeat(40) }),
      clientCapabilities: ['shell_command', 'incremental_streaming'],
      mcpTools: [],
      preapproved_tools: ['read_file', 'list_dir'],
      flowConfigSchemaVersion: 'v1',
    },
    detached: true,
  });
}

export const EXECUTE_ANSWER_FIELDS = { status: 'accepted', accepted_on: 'spike-gateway-0' } as const;

/** SET NX PX and a return: the shape of acquire-lock-2.lua without its DEL. */
export const REDIS_SCRIPT = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end\nreturn 0\n";
/** Keys expire soon after the spike; none collide within a run (a counter and the pid). */
export const REDIS_TTL_MS = '10000';

export const EXECUTE_WORKFLOW_PATH = '/DuoWorkflow/ExecuteWorkflow';

/** The startRequest of a call, as the gateway sends it. */
export function startRequest(n: number): StartWorkflowRequest {
  return {
    workflowID: `wf-${n}`,
    goal: 'spike goal: summarise the merge request and list the files it touches',
    workflowMetadata: JSON.stringify({ extended_logging: false, git_url: 'https://gitlab.example.com/group/project.git' }),
    clientCapabilities: ['shell_command', 'incremental_streaming'],
    mcpTools: [],
    preapproved_tools: [],
  };
}

/** The first (and only) action the spike's workflow service sends. */
export const FIRST_ACTION: Action = {
  requestID: 'action-1',
  newCheckpoint: { status: 'RUNNING', checkpoint: JSON.stringify({ channel_values: { plan: { steps: [] } }, ts: '2025-01-01T00:00:00Z' }), goal: 'spike goal', errors: [] },
};

/** The call metadata (what the owner's Service.Headers and the caller add). */
export function callMetadata(n: number): Record<string, string> {
  return {
    'x-gitlab-oauth-token': 'glpat-xxxxxxxxxxxxxxxxxxxx',
    'x-gitlab-instance-id': 'spike',
    'x-gitlab-client-name': 'spike-dispatcher',
    'x-request-id': `req-${n}`,
  };
}
