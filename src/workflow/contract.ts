/**
 * The DuoWorkflow gRPC contract (SPEC §4): the service definition loaded from
 * proto/contract.proto, the protobufjs reflection types used for protojson, and the
 * TypeScript shapes of the messages as @grpc/proto-loader decodes them (proto field
 * names, int64 as string, the chosen oneof member named by its oneof).
 */
import * as protoLoader from '@grpc/proto-loader';
import type * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { fromRoot } from '../paths';

export const protoPath = fromRoot('proto', 'contract.proto');
export const executeWorkflowPath = '/DuoWorkflow/ExecuteWorkflow';

const loaderOptions: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: false,
  oneofs: true,
};

const packageDefinition = protoLoader.loadSync(protoPath, loaderOptions);

/** The service definition for grpc-js clients and servers. */
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

export interface McpTool {
  name?: string;
  description?: string;
  inputSchema?: string;
  trusted?: boolean;
}

export interface StructValue {
  fields?: Record<string, unknown>;
}

export interface Approval {
  approval?: { remember_approval?: boolean; tool_name?: string; tool_args_json?: string };
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
  additional_context?: Array<{ category?: string; id?: string; content?: string; metadata?: string }>;
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

export interface NewCheckpoint {
  status?: string;
  checkpoint?: string;
  goal?: string;
  errors?: string[];
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
  [other: string]: unknown;
}

export interface HttpResponse {
  headers?: Record<string, string>;
  statusCode?: number;
  body?: string;
  error?: string;
}

export interface ActionResponse {
  requestID: string;
  plainTextResponse?: { response?: string; error?: string };
  httpResponse?: HttpResponse;
}

export type ClientEvent =
  | { startRequest: StartWorkflowRequest }
  | { actionResponse: ActionResponse }
  | { heartbeat: { timestamp: string } }
  | { stopWorkflow: { reason: string } };

/** A ClientEvent as decoded on the service side: the oneof member is named in `response`. */
export interface DecodedClientEvent {
  response?: 'startRequest' | 'actionResponse' | 'heartbeat' | 'stopWorkflow';
  startRequest?: StartWorkflowRequest;
  actionResponse?: ActionResponse;
  heartbeat?: { timestamp?: string };
  stopWorkflow?: { reason?: string };
}
