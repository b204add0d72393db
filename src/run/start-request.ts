/**
 * The StartWorkflowRequest that is sent (docs/spec.md §3): the caller's protojson body, decoded
 * and bounded, with the owner's authorization applied — the authorized WorkflowID, the
 * owner's capabilities, and the tools of its MCP servers, in place of the caller's; the
 * approval is forwarded (it resumes a turn paused for tool approval).
 */
import * as grpc from '@grpc/grpc-js';
import { metadataValue, type Caller } from '../core/caller';
import { GatewayError } from '../core/errors';
import type { Transport } from '../core/vocabulary';
import type { TraceHeaders } from '../observability/tracing';
import type { DuoWorkflowAuth } from '../owner/preauth';
import { messageTypes, type McpTool, type StartWorkflowRequest } from '../workflow/contract';
import { JsonBodyError, parseJsonBody } from '../core/json-body';
import { MAX_JSON_DEPTH, ProtoJsonError, decodeProtoJson } from '../workflow/protojson';

/**
 * Decodes the execute body as Workhorse does (protojson, unknown fields discarded); throws
 * INVALID_REQUEST naming what is wrong — for any input, including bodies nested deeper than
 * MAX_JSON_DEPTH, invalid UTF-8 and wrong JSON types.
 */
export function decodeStartRequest(body: Buffer): StartWorkflowRequest {
  let json: unknown;
  try {
    json = parseJsonBody(body, MAX_JSON_DEPTH);
  } catch (err) {
    if (err instanceof JsonBodyError) throw new GatewayError('INVALID_REQUEST', err.message);
    throw err;
  }
  try {
    return decodeProtoJson(messageTypes.StartWorkflowRequest, json) as StartWorkflowRequest;
  } catch (err) {
    if (err instanceof ProtoJsonError) throw new GatewayError('INVALID_REQUEST', `request body is not a StartWorkflowRequest: ${err.message}`);
    throw err;
  }
}

/**
 * The client capabilities a WebSocket client may announce, and the owner's server
 * capabilities passed on (on every transport), as Workhorse's newest websocket.go lists
 * them (gitlabhq 04e80ac: ten client, six server); the start carries them in these lists'
 * order, the client's first. An execute announces no client capability: its caller
 * executes nothing, and Workhorse's BuildHTTP clears the body's list (http_handler.go).
 */
const CLIENT_CAPABILITIES = [
  'incremental_streaming',
  'shell_command',
  'read_file_chunked',
  'command_timeout',
  'web_search',
  'tool_call_streaming',
  'schedule_notification',
  'grep_fixed_strings',
  'read_file_image',
  'auto_mode',
] as const;
const SERVER_CAPABILITIES = [
  'advanced_search',
  'tool_call_approval',
  'tool_call_pattern_approval',
  'job_trace_pagination',
  'incremental_checkpoints',
  'incremental_checkpoints_only',
] as const;

function allowed(allowlist: readonly string[], asked: readonly string[] | null | undefined): string[] {
  const set = new Set(asked ?? []);
  return allowlist.filter((c) => set.has(c));
}

/**
 * Applies the owner's authorization; throws INVALID_REQUEST on a workflowID mismatch.
 * An execute's own capabilities and MCP tools are dropped (the owner's replace them); a
 * WebSocket client keeps the capabilities Workhorse allows and its own MCP tools, which
 * the owner's are appended to (`withMcpTools`, once discovered). The owner's server
 * capabilities pass Workhorse's allowlist on both transports.
 */
export function authorizeStartRequest(request: StartWorkflowRequest, auth: DuoWorkflowAuth, transport: Transport): StartWorkflowRequest {
  if (request.workflowID && request.workflowID !== auth.WorkflowID) {
    throw new GatewayError('INVALID_REQUEST', `workflowID ${JSON.stringify(request.workflowID)} does not match the authorized workflow`);
  }
  if (transport === 'websocket') {
    return {
      ...request,
      workflowID: auth.WorkflowID,
      clientCapabilities: [...allowed(CLIENT_CAPABILITIES, request.clientCapabilities), ...allowed(SERVER_CAPABILITIES, auth.ServerCapabilities)],
      mcpTools: [...(request.mcpTools ?? [])],
      preapproved_tools: [...(request.preapproved_tools ?? [])],
    };
  }
  return {
    ...request,
    workflowID: auth.WorkflowID,
    clientCapabilities: allowed(SERVER_CAPABILITIES, auth.ServerCapabilities),
    mcpTools: [],
    preapproved_tools: [],
  };
}

/** The tools a run offers (its MCP servers' discovered tools), appended to the start request's. */
export function withMcpTools(request: StartWorkflowRequest, offered: { tools: readonly McpTool[]; preapprovedTools: readonly string[] }): StartWorkflowRequest {
  return { ...request, mcpTools: [...(request.mcpTools ?? []), ...offered.tools], preapproved_tools: [...(request.preapproved_tools ?? []), ...offered.preapprovedTools] };
}

/**
 * gRPC metadata for the call: the owner's Service.Headers, the caller's GitLab client
 * headers (`x-gitlab-client-name`, `x-gitlab-client-version`, as Workhorse passes them
 * on; the owner's own value wins), the correlation id as `x-request-id` and
 * `x-gitlab-correlation-id` (labkit's correlation interceptor, as Workhorse sends it:
 * docs/spec.md §13), and with tracing on the stream-open span's `traceparent`/`tracestate`.
 * The caller's User-Agent cannot travel as metadata — grpc-js writes its own `user-agent`
 * over it — so the channel carries it (ChannelPool.open's userAgent).
 */
export function callMetadata(auth: DuoWorkflowAuth, requestId: string, caller?: Caller, trace?: TraceHeaders): grpc.Metadata {
  const metadata = new grpc.Metadata();
  for (const [name, value] of Object.entries(auth.Service.Headers ?? {})) {
    const key = name.toLowerCase();
    // grpc-js throws on keys outside [0-9a-z_.-]; such a header cannot be sent anyway.
    if (!/^[0-9a-z_.-]+$/.test(key) || key.startsWith('grpc-')) continue;
    if (key.endsWith('-bin')) metadata.set(key, Buffer.from(value, 'base64'));
    else metadata.set(key, value);
  }
  for (const [key, value] of [
    ['x-gitlab-client-name', caller?.clientName],
    ['x-gitlab-client-version', caller?.clientVersion],
  ] as const) {
    const text = metadataValue(value);
    if (text !== undefined && metadata.get(key).length === 0) metadata.set(key, text);
  }
  metadata.set('x-request-id', requestId);
  metadata.set('x-gitlab-correlation-id', requestId);
  if (trace) {
    metadata.set('traceparent', trace.traceparent);
    if (trace.tracestate) metadata.set('tracestate', trace.tracestate);
  }
  return metadata;
}
