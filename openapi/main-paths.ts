/**
 * The main listener's operations (docs/spec.md §1): the execute, the follow, the WebSocket
 * upgrade, and the owner's internal routes. Each names the error codes it can answer; their
 * statuses and Retry-After come from the catalog (error-responses.ts).
 */
import type { ErrorCode } from '../src/core/errors';
import { FOLLOW_PATH } from '../src/follow/route';
import { followEventKinds } from '../src/follow/words';
import { EXECUTE_PATH } from '../src/http/execute-route';
import { USER_STOP } from '../src/run/stop-reasons';
import * as close from '../src/websocket/close-codes';
import { WEBSOCKET_PATH } from '../src/websocket/route';
import { HEADERS, errorResponses } from './error-responses';
import type { JsonSchema } from './protojson-schema';
import { followDataName, schemaRef } from './schemas';

export const PARAMETERS = '#/components/parameters/';
const parameter = (name: string): JsonSchema => ({ $ref: `${PARAMETERS}${name}` });
const requestIdHeader = { 'X-Request-Id': { $ref: `${HEADERS}X-Request-Id` } };

/** An express path (`:workflow_id`) as an OpenAPI one (`{workflow_id}`). */
export function openApiPath(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z_]+)/g, '{$1}');
}

/** The codes each operation can answer, before any stream is committed. */
export const operationErrors = {
  execute: [
    'INVALID_REQUEST',
    'PREAUTH_DENIED',
    'USAGE_QUOTA_EXCEEDED',
    'WORKFLOW_LOCKED',
    'STOPPED',
    'ACTOR_LIMIT',
    'CLIENT_GONE',
    'INTERNAL',
    'OWNER_UNAVAILABLE',
    'PREAUTH_INVALID',
    'WORKFLOW_SERVICE_UNAVAILABLE',
    'LOCK_UNAVAILABLE',
    'DRAINING',
    'CAPACITY_EXHAUSTED',
  ],
  follow: ['INVALID_REQUEST', 'PREAUTH_DENIED', 'CLIENT_GONE', 'INTERNAL', 'OWNER_UNAVAILABLE', 'PREAUTH_INVALID', 'LOCK_UNAVAILABLE', 'DRAINING', 'CAPACITY_EXHAUSTED'],
  websocket: ['INVALID_REQUEST', 'PREAUTH_DENIED', 'FORBIDDEN_ORIGIN', 'CLIENT_GONE', 'INTERNAL', 'OWNER_UNAVAILABLE', 'PREAUTH_INVALID', 'DRAINING', 'CAPACITY_EXHAUSTED'],
  stop: ['INVALID_REQUEST', 'UNAUTHORIZED', 'NOT_CANCELLABLE', 'INTERNAL', 'LOCK_UNAVAILABLE'],
  run: ['UNAUTHORIZED', 'NOT_FOUND', 'INTERNAL', 'LOCK_UNAVAILABLE'],
} as const satisfies Record<string, readonly ErrorCode[]>;

/** What the caller presents is the owner's to judge: longrun forwards it with the preauth (docs/spec.md §2). */
const ownerJudges = [{ callerCredentials: [] }];

function execute(): JsonSchema {
  return {
    post: {
      operationId: 'execute',
      tags: ['Dispatch'],
      summary: 'Start a turn of a workflow: blocking (ndjson) or detached (202), as the owner decides',
      description:
        "Asks the owner first (the preauth: same method, path and query, the caller's headers; docs/spec.md §2), then reads the body, takes the workflow's lock, opens the workflow service's stream and sends the start (docs/spec.md §3). Detached mode comes from the owner's answer only. After a blocking 200 is committed a failure can only end the stream; after a detached 202 the run's end is reported by the segment-end callback (webhook `segmentEnd`).",
      security: ownerJudges,
      parameters: [parameter('workflow_id'), parameter('X-Request-Id')],
      requestBody: {
        description: 'A protojson StartWorkflowRequest of at most 4 MiB, read as Workhorse reads it (docs/errors.md "The execute body"); an empty body reads as `{}`.',
        required: false,
        content: { 'application/json': { schema: schemaRef('StartWorkflowRequest') } },
      },
      responses: {
        '200': {
          description:
            'Blocking (docs/spec.md §3a): `application/x-ndjson`, committed on the first line, one newCheckpoint Action per line (CheckpointLine), an empty line as keepalive every LONGRUN_KEEPALIVE_MS. Detached (docs/spec.md §3b): `application/json`, the turn finished before it was accepted.',
          headers: requestIdHeader,
          content: {
            'application/x-ndjson': { schema: schemaRef('CheckpointLine') },
            'application/json': { schema: schemaRef('Finished') },
          },
        },
        '202': {
          description: 'Detached: accepted, on its first action or once LONGRUN_ACCEPT_WAIT_MS passed after the start was written; the run goes on without its caller.',
          headers: requestIdHeader,
          content: { 'application/json': { schema: schemaRef('Accepted') } },
        },
        ...errorResponses(operationErrors.execute),
      },
    },
  };
}

function follow(): JsonSchema {
  const events = followEventKinds.map((kind) => ({
    type: 'object',
    description: `\`${kind}\``,
    properties: {
      event: { const: kind },
      ...(kind === 'idle' ? {} : { id: { type: 'string', pattern: '^\\d+$', description: "The event's position in the workflow's log (Last-Event-ID)." } }),
      data: { type: 'string', contentMediaType: 'application/json', contentSchema: schemaRef(followDataName(kind)) },
    },
    required: kind === 'idle' ? ['event', 'data'] : ['event', 'id', 'data'],
  }));
  return {
    get: {
      operationId: 'follow',
      tags: ['Follow'],
      summary: "Follow a workflow's runs live, across replicas and segments (Server-Sent Events)",
      description:
        "In order: the drain (503), the position (Last-Event-ID over `?after=`; 400 when it is not an event id), the caps (503), the owner's preauthorization (a GET of this path and query; a refusal is passed through), then the stream (docs/spec.md §14). Without a position it starts with the latest run and checkpoint, then follows live; it ends after `idle`. A stream the gateway ends before `idle` (a drain, a slow reader) is resumed with Last-Event-ID, on any replica.",
      security: ownerJudges,
      parameters: [
        parameter('workflow_id'),
        parameter('X-Request-Id'),
        {
          name: 'Last-Event-ID',
          in: 'header',
          description: 'Resume after this event id (EventSource sends it when it reconnects); wins over `after`.',
          schema: { type: 'string', pattern: '^\\d{1,16}$' },
        },
        { name: 'after', in: 'query', description: 'Start after this event id.', schema: { type: 'string', pattern: '^\\d{1,16}$' } },
      ],
      responses: {
        '200': {
          description: `Server-Sent Events: each event's \`event:\` is one of ${followEventKinds.map((k) => `\`${k}\``).join(', ')}, its \`data:\` one line of JSON, its \`id:\` its position in the workflow's log (none on \`idle\`); a comment line as keepalive every LONGRUN_FOLLOW_KEEPALIVE_MS. The schema is that of one event, as an SSE parser yields it.`,
          headers: requestIdHeader,
          content: { 'text/event-stream': { schema: { oneOf: events } } },
        },
        ...errorResponses(operationErrors.follow),
      },
    },
  };
}

/** The close codes a session ends with (src/websocket/close-codes.ts), in words. */
function closeCodes(): string {
  const named = [
    close.NORMAL,
    close.SERVER_SHUTDOWN,
    close.SERVICE_UNAVAILABLE,
    close.QUOTA_EXCEEDED,
    close.NO_START,
    close.HEARTBEAT_FLOOD,
    close.LOCK_HELD,
    close.SERVICE_RESTART,
    close.RUN_UNREACHABLE,
    close.LOCK_LOST,
  ];
  const lines = named.map((c) => `${c.code}${c.reason ? ` "${c.reason}"` : ''}`);
  return [
    ...lines,
    "1013 with the refusal's message: the store fence is up (docs/spec.md §5)",
    `${close.INVALID_REQUEST_CODE} with the service's message: the workflow service refused the start as invalid`,
  ].join('; ');
}

function websocket(): JsonSchema {
  return {
    get: {
      operationId: 'websocket',
      tags: ['Sessions'],
      summary: "An interactive session over a WebSocket (Workhorse's route)",
      description: [
        "An RFC 6455 upgrade (docs/spec.md §11). Before the upgrade, on the plain request: the drain, the process's session cap, the Origin check (a browser page of another site is refused), the owner's preauthorization (a GET of this path and query; a refusal is passed through). A GET without an upgrade is 400.",
        'After the 101: no subprotocol (no `Sec-WebSocket-Protocol` is chosen), no compression, text frames of at most 4 MiB, each one JSON document.',
        'The client sends ClientEvent frames (protojson, read as the execute body is): a `startRequest` first, then `actionResponse`s, `heartbeat`s and a `stopWorkflow`; a frame that does not decode closes the session (1000). The gateway sends Action frames (protojson, as Workhorse writes them), the actions the client executes and its checkpoints.',
        `A session whose connection is lost parks its run for the client to re-attach (docs/spec.md §12). Close codes: ${closeCodes()}.`,
      ].join('\n\n'),
      security: ownerJudges,
      parameters: [
        parameter('X-Request-Id'),
        { name: 'Upgrade', in: 'header', required: true, schema: { type: 'string', const: 'websocket' } },
        { name: 'Connection', in: 'header', required: true, schema: { type: 'string', const: 'Upgrade' } },
        { name: 'Sec-WebSocket-Key', in: 'header', required: true, schema: { type: 'string' } },
        { name: 'Sec-WebSocket-Version', in: 'header', required: true, schema: { type: 'string', const: '13' } },
        { name: 'Origin', in: 'header', description: "A browser's page: its origin must be the request's host or in LONGRUN_WS_ALLOWED_ORIGINS.", schema: { type: 'string' } },
      ],
      responses: {
        '101': {
          description: 'Switching Protocols: the session. Frames: ClientEvent from the client, Action from the gateway (see `x-websocket-frames`).',
          headers: {
            ...requestIdHeader,
            Upgrade: { schema: { type: 'string', const: 'websocket' } },
            Connection: { schema: { type: 'string', const: 'Upgrade' } },
            'Sec-WebSocket-Accept': { schema: { type: 'string' } },
          },
        },
        ...errorResponses(operationErrors.websocket),
      },
      'x-websocket-frames': { client: schemaRef('ClientEvent'), server: schemaRef('Action') },
    },
  };
}

function internalStop(): JsonSchema {
  return {
    post: {
      operationId: 'stopRun',
      tags: ['Owner'],
      summary: "Stop the workflow's run, on whichever replica holds it",
      description: `Sets the workflow's stop signal; the run holding the workflow (on any replica) stops with the reason (${USER_STOP} when the body names none) and reports \`stop_requested\` to the segment-end callback (docs/spec.md §5).`,
      security: [{ ownerJwt: [] }],
      parameters: [parameter('workflow_id'), parameter('X-Request-Id')],
      requestBody: { required: false, content: { 'application/json': { schema: schemaRef('StopRequest') } } },
      responses: {
        '202': {
          description: 'A run holds the workflow: the stop is on its way.',
          headers: requestIdHeader,
          content: { 'application/json': { schema: schemaRef('StopRequested') } },
        },
        ...errorResponses(operationErrors.stop),
      },
    },
  };
}

function internalRun(): JsonSchema {
  return {
    get: {
      operationId: 'getRun',
      tags: ['Owner'],
      summary: "The workflow's run record: who holds it, since when, what is in flight",
      security: [{ ownerJwt: [] }],
      parameters: [parameter('workflow_id'), parameter('X-Request-Id')],
      responses: {
        '200': { description: 'The run record (docs/spec.md §5).', headers: requestIdHeader, content: { 'application/json': { schema: schemaRef('RunRecord') } } },
        ...errorResponses(operationErrors.run),
      },
    },
  };
}

/** The paths the owner calls (src/http/internal-routes.ts), mounted under /internal. */
export const INTERNAL_STOP_PATH = '/internal/workflows/{workflow_id}/stop';
export const INTERNAL_RUN_PATH = '/internal/workflows/{workflow_id}/run';

export function mainPaths(): Record<string, JsonSchema> {
  return {
    [openApiPath(EXECUTE_PATH)]: execute(),
    [openApiPath(FOLLOW_PATH)]: follow(),
    [WEBSOCKET_PATH]: websocket(),
    [INTERNAL_STOP_PATH]: internalStop(),
    [INTERNAL_RUN_PATH]: internalRun(),
  };
}
