/**
 * The DuoWorkflow gRPC contract (docs/spec.md §4, ../shared/CONTRACT.md): the service definition
 * loaded from proto/contract.proto, the protobufjs reflection used for protojson, and the
 * TypeScript shapes of the messages as @grpc/proto-loader decodes them (proto field
 * names, int64 as string, enums by name, the chosen oneof member named by its oneof, and
 * a `_<field>` key naming each set proto3 `optional` field).
 */
import * as protoLoader from '@grpc/proto-loader';
import type * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { fromRoot } from '../core/paths';

export const protoPath = fromRoot('proto', 'contract.proto');
export const executeWorkflowPath = '/DuoWorkflow/ExecuteWorkflow';

/** How proto-loader maps messages to plain objects; also the toObject options of its deserializers. */
export const loaderOptions: Readonly<protoLoader.Options> = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: false,
  oneofs: true,
};

const packageDefinition = protoLoader.loadSync(protoPath, loaderOptions);

/**
 * The DuoWorkflow service definition for grpc-js clients and servers (every rpc of the
 * contract; longrun calls ExecuteWorkflow only).
 */
export const duoWorkflowService = packageDefinition['DuoWorkflow'] as grpc.ServiceDefinition;

/** protobufjs reflection, for protojson and for tests that inspect the wire encoding. */
export const protoRoot: protobuf.Root = (() => {
  const root = new protobuf.Root();
  root.loadSync(protoPath, { keepCase: true });
  root.resolveAll();
  return root;
})();

export const messageTypes = {
  ClientEvent: protoRoot.lookupType('ClientEvent'),
  StartWorkflowRequest: protoRoot.lookupType('StartWorkflowRequest'),
  Action: protoRoot.lookupType('Action'),
  ActionResponse: protoRoot.lookupType('ActionResponse'),
};

/**
 * The ExecuteWorkflow service definition for longrun's client side: as
 * duoWorkflowService, except that a ClientEvent carrying an httpResponse (one per relayed
 * action, all built by longrun with the contract's own types: strings, an int32, a
 * string map) is encoded as it is, without proto-loader's fromObject copy first. Every
 * other event takes proto-loader's serializer. The bytes are the same either way (and
 * in Node protobufjs writes into a Buffer, which grpc-js takes without a copy).
 */
export const duoWorkflowClientService: grpc.ServiceDefinition = (() => {
  const method = duoWorkflowService['ExecuteWorkflow'] as grpc.MethodDefinition<ClientEvent, Action>;
  const loaded = method.requestSerialize;
  const clientEvent = messageTypes.ClientEvent;
  const requestSerialize = (event: ClientEvent): Buffer =>
    'actionResponse' in event && event.actionResponse.httpResponse !== undefined ? (clientEvent.encode(event).finish() as Buffer) : loaded(event);
  return { ...duoWorkflowService, ExecuteWorkflow: { ...method, requestSerialize } };
})();

// The shapes below are what @grpc/proto-loader decodes (and accepts to encode) with the
// options above. Only the fields longrun or its tests read are spelled out for the action
// payloads; every other field is still carried through by reflection.

export interface Icon {
  url?: string;
  mime_type?: string;
  sizes?: string[];
  theme?: string;
}

export interface ToolAnnotations {
  title?: string;
  read_only_hint?: boolean;
  destructive_hint?: boolean;
  idempotent_hint?: boolean;
  open_world_hint?: boolean;
}

export interface McpTool {
  name?: string;
  description?: string;
  inputSchema?: string;
  icons?: { items?: Icon[] };
  annotations?: ToolAnnotations;
  trusted?: boolean;
}

export interface AdditionalContext {
  category?: string;
  id?: string;
  content?: string;
  metadata?: string;
}

/** google.protobuf.Struct as proto-loader carries it: `{fields: {name: Value}}`. */
export interface StructValue {
  fields?: Record<string, unknown>;
}

/** Approval.ApprovalSource: how a tool call was approved (the service logs it). */
export const approvalSources = [
  'APPROVAL_SOURCE_UNSPECIFIED',
  'APPROVAL_SOURCE_USER_EXPLICIT',
  'APPROVAL_SOURCE_PRETOOLUSE_HOOK',
  'APPROVAL_SOURCE_AUTO_MODE',
  'APPROVAL_SOURCE_PREAPPROVED_CONFIG',
] as const;
/** An enum value by name, or its number when this contract does not know it (proto3 enums are open). */
export type ApprovalSource = (typeof approvalSources)[number] | number;

export interface PolicyRef {
  origin?: string;
  file?: string;
  hash?: string;
  version?: string;
}

export interface Approved {
  remember_approval?: boolean;
  tool_name?: string;
  tool_args_json?: string;
  approval_source?: ApprovalSource;
  policy_ref?: PolicyRef;
}

export interface Approval {
  approval?: Approved;
  rejection?: { message?: string };
  user_decision?: 'approval' | 'rejection';
}

export interface StartWorkflowRequest {
  clientVersion?: string;
  workflowID?: string;
  workflowDefinition?: string;
  goal?: string;
  workflowMetadata?: string;
  clientCapabilities?: string[];
  mcpTools?: McpTool[];
  additional_context?: AdditionalContext[];
  approval?: Approval;
  flowConfig?: StructValue;
  flowConfigSchemaVersion?: string;
  preapproved_tools?: string[];
  flowConfigId?: string;
  flowVersion?: string;
  streaming?: boolean;
  resume_checkpoint_ts?: string;
}

export interface RunHTTPRequest {
  method?: string;
  path?: string;
  body?: string;
}

/** Tokens one agent has used of its context window. */
export interface TokenBreakdown {
  total_tokens?: number;
  max_tokens?: number;
}

export interface NewCheckpoint {
  status?: string;
  checkpoint?: string;
  goal?: string;
  errors?: string[];
  /** Token usage per agent, by agent name (shown to users). */
  agent_context_usage?: Record<string, TokenBreakdown>;
}

export interface ScheduleNotification {
  task_id?: string;
  condition?: string;
  message?: string;
}

export interface TrackLlmCallForSelfHosted {
  workflowID?: string;
  featureQualifiedName?: string;
  featureAiCatalogItem?: boolean;
}

/** Every member of Action's `action` oneof, in field-number order. */
export const actionKinds = [
  'runCommand',
  'runHTTPRequest',
  'runReadFile',
  'runWriteFile',
  'runGitCommand',
  'runEditFile',
  'newCheckpoint',
  'listDirectory',
  'grep',
  'findFiles',
  'runMCPTool',
  'mkdir',
  'runReadFiles',
  'runShellCommand',
  'trackLlmCallForSelfHosted',
  'scheduleNotification',
] as const;
export type ActionKind = (typeof actionKinds)[number];

export interface Action {
  requestID?: string;
  action?: ActionKind;
  runHTTPRequest?: RunHTTPRequest;
  newCheckpoint?: NewCheckpoint;
  runMCPTool?: { name?: string; args?: string };
  scheduleNotification?: ScheduleNotification;
  trackLlmCallForSelfHosted?: TrackLlmCallForSelfHosted;
  [other: string]: unknown;
}

export interface HttpResponse {
  headers?: Record<string, string>;
  statusCode?: number;
  body?: string;
  error?: string;
}

export interface ScheduleNotificationResponse {
  accepted?: boolean;
  reason?: string;
  fires_at?: string;
}

export interface ActionResponse {
  requestID: string;
  plainTextResponse?: { response?: string; error?: string };
  httpResponse?: HttpResponse;
  scheduleNotificationResponse?: ScheduleNotificationResponse;
  /** Set by proto-loader on decode: which member of `response_type` is present. */
  response_type?: 'plainTextResponse' | 'httpResponse' | 'scheduleNotificationResponse';
}

export type ClientEvent = { startRequest: StartWorkflowRequest } | { actionResponse: ActionResponse } | { heartbeat: { timestamp: string } } | { stopWorkflow: { reason: string } };

/** A ClientEvent as decoded on the service side: the oneof member is named in `response`. */
export interface DecodedClientEvent {
  response?: 'startRequest' | 'actionResponse' | 'heartbeat' | 'stopWorkflow';
  startRequest?: StartWorkflowRequest;
  actionResponse?: ActionResponse;
  heartbeat?: { timestamp?: string };
  stopWorkflow?: { reason?: string };
}
