/**
 * The contract's messages as @longrun/client types them (its contract.ts, protojson) against
 * proto/contract.proto: a value of each type that sets every field it declares (`Required`,
 * so the compiler refuses one it lacks or one it does not declare) names exactly the proto
 * message's fields, and the gateway's protojson decoder (src/workflow/protojson.ts) reads
 * it whole — a field the client spells wrongly, misses or types wrongly fails here.
 */
import type protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import type {
  Action,
  ActionResponse,
  AdditionalContext,
  Approved,
  Checkpoint,
  ClientEvent,
  EditFile,
  FindFiles,
  Grep,
  HeartbeatRequest,
  HttpResponse,
  Icon,
  ListDirectory,
  McpTool,
  Mkdir,
  NewCheckpoint,
  PlainTextResponse,
  PolicyRef,
  ReadFile,
  ReadFiles,
  RunCommandAction,
  RunGitCommand,
  RunHTTPRequest,
  RunMCPTool,
  RunShellCommand,
  ScheduleNotification,
  ScheduleNotificationResponse,
  StartWorkflowRequest,
  StopWorkflowRequest,
  ToolAnnotations,
  TrackLlmCallForSelfHosted,
  WriteFile,
} from '@longrun/client';
import { messageTypes, protoRoot } from '../../src/workflow/contract';
import { decodeProtoJson, encodeProtoJson } from '../../src/workflow/protojson';
import { WORKHORSE_MARSHAL_OPTIONS } from '../../src/workflow/action-line';

const type = (name: string): protobuf.Type => protoRoot.lookupType(name);
const fieldsOf = (name: string): string[] => type(name).fieldsArray.map((f) => f.name);
const keysOf = (value: object): string[] => Object.keys(value);

const icon: Required<Icon> = { url: 'https://x/i.png', mime_type: 'image/png', sizes: ['16x16'], theme: 'dark' };
const annotations: Required<ToolAnnotations> = { title: 'Read', read_only_hint: true, destructive_hint: false, idempotent_hint: true, open_world_hint: false };
const mcpTool: Required<McpTool> = { name: 'read', description: 'reads', inputSchema: '{"type":"object"}', icons: { items: [icon] }, annotations, trusted: true };
const context: Required<AdditionalContext> = { category: 'file', id: 'a.ts', content: 'x', metadata: '{}' };
const policyRef: Required<PolicyRef> = { origin: 'o', file: 'f', hash: 'h', version: 'v' };
const approved: Required<Approved> = {
  remember_approval: true,
  tool_name: 'read',
  tool_args_json: '{}',
  approval_source: 'APPROVAL_SOURCE_USER_EXPLICIT',
  policy_ref: policyRef,
};
const start: Required<StartWorkflowRequest> = {
  clientVersion: '1.0.0',
  workflowID: '42',
  workflowDefinition: 'chat',
  goal: 'fix it',
  workflowMetadata: '{"a":1}',
  clientCapabilities: ['shell_command'],
  mcpTools: [mcpTool],
  additional_context: [context],
  approval: { approval: approved },
  flowConfig: { agents: [{ name: 'a', depth: 2 }], strict: true, none: null },
  flowConfigSchemaVersion: 'v1',
  preapproved_tools: ['read'],
  flowConfigId: 'c',
  flowVersion: '2',
  streaming: true,
  resume_checkpoint_ts: '2026-01-01T00:00:00Z',
};
const plainText: Required<PlainTextResponse> = { response: 'ok', error: '' };
const http: Required<HttpResponse> = { headers: { 'content-type': 'text/plain' }, statusCode: 200, body: 'ok', error: '' };
const scheduled: Required<ScheduleNotificationResponse> = { accepted: true, reason: '', fires_at: '2026-01-01T00:00:00Z' };
/** One answer for each member of ActionResponse's oneof. */
const answers: ActionResponse[] = [
  { requestID: '1', plainTextResponse: plainText },
  { requestID: '2', httpResponse: http },
  { requestID: '3', scheduleNotificationResponse: scheduled },
];
const checkpoint: Required<Checkpoint['newCheckpoint']> = {
  status: 'RUNNING',
  checkpoint: 'c',
  goal: 'g',
  errors: [],
  agent_context_usage: { chat: { total_tokens: 1_000, max_tokens: 200_000 } },
};

const heartbeat: Required<HeartbeatRequest> = { timestamp: '1767225600000' };
const stop: Required<StopWorkflowRequest> = { reason: 'USER_STOP' };
/** One event for each member of ClientEvent's oneof. */
const events: ClientEvent[] = [{ startRequest: start }, { actionResponse: answers[0] as ActionResponse }, { heartbeat }, { stopWorkflow: stop }];
const newCheckpoint: Required<NewCheckpoint> = checkpoint;
/** An Action setting every member of its oneof (a real one sets one), each payload with every field. */
const action: Required<Action> = {
  requestID: '7',
  runCommand: { program: 'ls', arguments: ['-l'], flags: ['-a'], timeout: '30' } satisfies Required<RunCommandAction>,
  runHTTPRequest: { method: 'GET', path: '/api/v4/projects/1', body: '' } satisfies Required<RunHTTPRequest>,
  runReadFile: { filepath: 'a.ts', limit: '100', offset: '0' } satisfies Required<ReadFile>,
  runWriteFile: { filepath: 'a.ts', contents: 'x' } satisfies Required<WriteFile>,
  runGitCommand: { command: 'log', arguments: '-1', repository_url: 'https://x/r.git' } satisfies Required<RunGitCommand>,
  runEditFile: { filepath: 'a.ts', oldString: 'a', newString: 'b' } satisfies Required<EditFile>,
  newCheckpoint,
  listDirectory: { directory: '.' } satisfies Required<ListDirectory>,
  grep: { search_directory: '.', pattern: 'x', case_insensitive: true } satisfies Required<Grep>,
  findFiles: { name_pattern: '*.ts' } satisfies Required<FindFiles>,
  runMCPTool: { name: 'read', args: '{}' } satisfies Required<RunMCPTool>,
  mkdir: { directory_path: 'd' } satisfies Required<Mkdir>,
  runReadFiles: { filepaths: ['a.ts'] } satisfies Required<ReadFiles>,
  runShellCommand: { command: 'ls', timeout: '30' } satisfies Required<RunShellCommand>,
  trackLlmCallForSelfHosted: { workflowID: '42', featureQualifiedName: 'chat', featureAiCatalogItem: false } satisfies Required<TrackLlmCallForSelfHosted>,
  scheduleNotification: { task_id: 't', condition: 'c', message: 'm' } satisfies Required<ScheduleNotification>,
};
/** Each member's message type, by the member's name (from the proto: no list to keep). */
const memberTypes = (message: string): Map<string, string> =>
  new Map(type(message).fieldsArray.map((f) => [f.name, (f.resolvedType as protobuf.Type | null)?.fullName.slice(1) ?? '']));

describe("@longrun/client's message types are the contract's, as protojson", () => {
  it('each type declares exactly the fields of its proto message', () => {
    expect(keysOf(start)).toEqual(fieldsOf('StartWorkflowRequest'));
    expect(keysOf(mcpTool)).toEqual(fieldsOf('McpTool'));
    expect(keysOf(icon)).toEqual(fieldsOf('Icon'));
    expect(keysOf(annotations)).toEqual(fieldsOf('ToolAnnotations'));
    expect(keysOf(context)).toEqual(fieldsOf('AdditionalContext'));
    expect(keysOf(approved)).toEqual(fieldsOf('Approval.Approved'));
    expect(keysOf(policyRef)).toEqual(fieldsOf('Approval.PolicyRef'));
    expect(keysOf(plainText)).toEqual(fieldsOf('PlainTextResponse'));
    expect(keysOf(http)).toEqual(fieldsOf('HttpResponse'));
    expect(keysOf(scheduled)).toEqual(fieldsOf('ScheduleNotificationResponse'));
    expect(keysOf(checkpoint)).toEqual(fieldsOf('NewCheckpoint'));
    expect(keysOf(checkpoint.agent_context_usage['chat'] as object)).toEqual(fieldsOf('TokenBreakdown'));
  });

  it('the oneofs: an answer sets one of response_type, an approval one of user_decision', () => {
    const responseType = type('ActionResponse').oneofs['response_type'] as protobuf.OneOf;
    expect(answers.map((a) => keysOf(a).filter((k) => k !== 'requestID')).flat()).toEqual(responseType.oneof);
    expect([...keysOf({ approval: approved }), ...keysOf({ rejection: { message: 'no' } })]).toEqual((type('Approval').oneofs['user_decision'] as protobuf.OneOf).oneof);
  });

  it('the gateway decodes each of them whole: the start (a Struct as a JSON object, an enum by name) and every answer', () => {
    const decoded = decodeProtoJson(messageTypes.StartWorkflowRequest, start);
    expect(keysOf(decoded)).toEqual(fieldsOf('StartWorkflowRequest'));
    expect(decoded['flowConfig']).toMatchObject({ fields: { strict: { boolValue: true }, none: { nullValue: 'NULL_VALUE' } } });
    expect(decoded['approval']).toMatchObject({ approval: { approval_source: 'APPROVAL_SOURCE_USER_EXPLICIT', policy_ref: policyRef } });
    expect(decodeProtoJson(messageTypes.StartWorkflowRequest, { approval: { rejection: { message: 'no' } } })).toEqual({ approval: { rejection: { message: 'no' } } });
    for (const answer of answers) {
      const event = decodeProtoJson(messageTypes.ClientEvent, { actionResponse: answer });
      expect(event['actionResponse']).toEqual(answer);
    }
  });

  it('ClientEvent: one type for each member of its oneof, each declaring exactly its message’s fields', () => {
    expect(events.map((e) => keysOf(e)).flat()).toEqual((type('ClientEvent').oneofs['response'] as protobuf.OneOf).oneof);
    expect(keysOf(heartbeat)).toEqual(fieldsOf('HeartbeatRequest'));
    expect(keysOf(stop)).toEqual(fieldsOf('StopWorkflowRequest'));
    expect(decodeProtoJson(messageTypes.ClientEvent, { heartbeat })).toEqual({ heartbeat });
  });

  it('Action: every member of its oneof, each payload declaring exactly its message’s fields, as the gateway writes it', () => {
    expect(keysOf(action)).toEqual(fieldsOf('Action'));
    const members = memberTypes('Action');
    for (const [member, payload] of Object.entries(action)) {
      if (member === 'requestID') continue;
      expect(keysOf(payload as object), member).toEqual(fieldsOf(members.get(member) ?? ''));
      // What the gateway sends a WebSocket client for this member (Workhorse's marshal options): the same value.
      const one = { requestID: action.requestID, [member]: payload };
      expect(encodeProtoJson(messageTypes.Action, decodeProtoJson(messageTypes.Action, one), WORKHORSE_MARSHAL_OPTIONS), member).toEqual(one);
    }
  });
});
