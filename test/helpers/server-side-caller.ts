/**
 * A caller that behaves as GitLab's own server-side turns do (ee/app/services/ai/duo_workflows/
 * server_side_execution_service.rb, run by ServerSideTurnWorker), written from that code,
 * apart from the gateway's: it POSTs `…/workflows/:id/execute` through the instance's public
 * URL with the workflow's context as query parameters (Workhorse's preauth forwards no body),
 * a camelCase StartWorkflowRequest body with no workflowID, `Content-Type: application/json`
 * and the user's OAuth token as `Authorization: Bearer`; reads the body as it arrives, in
 * transport fragments, counting a line with content as an action and an empty line as a
 * keepalive, and only while the status is 200 (HTTParty runs its stream block before it
 * looks at the status); then takes any 2xx as success and leaves the outcome to the
 * workflow's status. A non-2xx status is an error whose reason it derives from the code.
 */
import http from 'node:http';

/** The error reasons the service gives a failed request (reason_for_status). */
export type ServerSideReason = 'workflow_locked' | 'forbidden' | 'execute_workflow_failed';

export interface ServerSideTurn {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** What the service decides from the status: success (any 2xx) or its error reason. */
  outcome: { kind: 'success' } | { kind: 'error'; reason: ServerSideReason };
  /** Lines with content seen while the status was 200: each an action (on_action yields). */
  actions: number;
  /** Empty lines seen while the status was 200. */
  keepalives: number;
  /** The body, as received. */
  body: string;
  /** When each fragment arrived (ms after the request was sent), and its bytes. */
  fragments: Array<{ at: number; bytes: number }>;
}

export interface ServerSideRequest {
  workflowId: string;
  /** The user's OAuth token (WorkflowContextGenerationService#generate_oauth_token). */
  token: string;
  goal: string;
  approval?: unknown;
  workflowDefinition?: string;
  projectId?: number;
  namespaceId?: number;
  rootNamespaceId?: number;
  /** Extra fields of the body (flowConfigId, flowConfigSchemaVersion, flowVersion, a scenario's workflowMetadata). */
  extra?: Record<string, unknown>;
}

/** The service's EXECUTE_PATH, CLIENT_VERSION and CLIENT_TYPE. */
export const SERVER_SIDE_CLIENT_VERSION = '1.0';
export const SERVER_SIDE_CLIENT_TYPE = 'gitlab-server-side';

function reasonFor(status: number): ServerSideReason {
  if (status === 409) return 'workflow_locked';
  if (status === 403) return 'forbidden';
  return 'execute_workflow_failed';
}

/** One server-side turn against the gateway at `baseUrl`, as ServerSideExecutionService#call_execute_endpoint makes it. */
export function serverSideTurn(baseUrl: string, turn: ServerSideRequest): Promise<ServerSideTurn> {
  const query = new URLSearchParams();
  const add = (name: string, value: string | number | undefined): void => {
    if (value !== undefined) query.set(name, String(value));
  };
  add('project_id', turn.projectId);
  add('namespace_id', turn.namespaceId);
  add('root_namespace_id', turn.rootNamespaceId);
  add('workflow_definition', turn.workflowDefinition);
  add('client_type', SERVER_SIDE_CLIENT_TYPE);
  const body = JSON.stringify({
    goal: turn.goal,
    ...(turn.workflowDefinition === undefined ? {} : { workflowDefinition: turn.workflowDefinition }),
    clientVersion: SERVER_SIDE_CLIENT_VERSION,
    ...(turn.approval === undefined ? {} : { approval: turn.approval }),
    ...turn.extra,
  });
  const url = new URL(`/api/v4/ai/duo_workflows/workflows/${encodeURIComponent(turn.workflowId)}/execute?${query.toString()}`, baseUrl);
  const sent = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${turn.token}`, 'content-length': Buffer.byteLength(body) },
    });
    req.once('error', reject);
    req.once('response', (res) => {
      const status = res.statusCode ?? 0;
      let lineHasContent = false;
      let actions = 0;
      let keepalives = 0;
      let text = '';
      const fragments: ServerSideTurn['fragments'] = [];
      res.setEncoding('utf8');
      res.on('data', (fragment: string) => {
        text += fragment;
        fragments.push({ at: performance.now() - sent, bytes: Buffer.byteLength(fragment) });
        // stream_handler: nothing of a non-200 body is progress; an empty fragment is nothing.
        if (status !== 200 || fragment === '') return;
        const parts = fragment.split('\n');
        const partial = parts.pop() as string;
        for (const line of parts) {
          if (lineHasContent || line !== '') actions += 1;
          else keepalives += 1;
          lineHasContent = false;
        }
        lineHasContent ||= partial !== '';
      });
      res.once('error', reject);
      res.once('end', () =>
        resolve({
          status,
          headers: res.headers,
          outcome: status >= 200 && status < 300 ? { kind: 'success' } : { kind: 'error', reason: reasonFor(status) },
          actions,
          keepalives,
          body: text,
          fragments,
        }),
      );
    });
    req.end(body);
  });
}
