/**
 * The DuoWorkflow gRPC contract (docs/spec.md §4, proto/contract.proto): the service
 * definition, the protobufjs reflection used for protojson, and the messages as
 * @grpc/proto-loader decodes them (proto field names, int64 as string, enums by name, the
 * chosen oneof member named by its oneof, and a `_<field>` key naming each set proto3
 * `optional` field).
 *
 * The message shapes are @longrun/client's (packages/client/src/contract.ts, protojson),
 * imported as types: proto-loader's plain objects are the same but for what is written
 * here — a google.protobuf.Struct as `{fields}`, and the name of a oneof's chosen member.
 */
import * as protoLoader from '@grpc/proto-loader';
import type * as grpc from '@grpc/grpc-js';
import type * as wire from '@longrun/client';
import protobuf from 'protobufjs';
import { fromRoot } from '../core/paths';
import type { Within } from '../core/type-proof';

const protoPath = fromRoot('proto', 'contract.proto');
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

// The messages as proto-loader carries them with the options above.

export type {
  AdditionalContext,
  Approval,
  HttpResponse,
  Icon,
  McpTool,
  NewCheckpoint,
  RunHTTPRequest,
  ScheduleNotification,
  ScheduleNotificationResponse,
  TokenBreakdown,
  ToolAnnotations,
  TrackLlmCallForSelfHosted,
} from '@longrun/client';

/** google.protobuf.Struct as proto-loader carries it: `{fields: {name: Value}}` (protojson: a plain JSON object). */
export interface StructValue {
  fields?: Record<string, unknown>;
}

/** StartWorkflowRequest, its flowConfig a Struct. */
export type StartWorkflowRequest = Omit<wire.StartWorkflowRequest, 'flowConfig'> & { flowConfig?: StructValue };

/** Every member of Action's `action` oneof, in field-number order (metric labels, simulators). */
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
] as const satisfies readonly wire.ActionKind[];
export type ActionKind = (typeof actionKinds)[number];

/** An Action; proto-loader names the member set in `action`. */
export interface Action extends wire.Action {
  action?: ActionKind;
}

/** An ActionResponse; proto-loader names the member set in `response_type` when it decodes one (the service's side). */
export type ActionResponse = wire.ActionResponse & { response_type?: keyof wire.ActionResponseMember };

/** What longrun writes on the stream: the client's ClientEvent, its start as above. */
export type ClientEvent = Exclude<wire.ClientEvent, { startRequest: unknown }> | { startRequest: StartWorkflowRequest };

/** A ClientEvent as decoded on the service side: the oneof member is named in `response`. */
export interface DecodedClientEvent {
  response?: 'startRequest' | 'actionResponse' | 'heartbeat' | 'stopWorkflow';
  startRequest?: StartWorkflowRequest;
  actionResponse?: ActionResponse;
  heartbeat?: wire.HeartbeatRequest;
  stopWorkflow?: wire.StopWorkflowRequest;
}

/** actionKinds names every member of the client's Action, and only those (type-proof.ts). */
export type ActionKindsProof = [Within<ActionKind, wire.ActionKind>, Within<wire.ActionKind, ActionKind>];
