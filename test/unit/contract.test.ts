/**
 * The DuoWorkflow contract (docs/spec.md §4) on the wire, and protojson (docs/spec.md §3).
 *
 * The expected bytes are written out by hand from the field numbers — tag byte =
 * field_number << 3 | wire_type (2 = length-delimited, 0 = varint, 1 = 64-bit) — so a
 * renumbered or renamed field in proto/contract.proto fails here, not against the real
 * workflow service.
 */
import { describe, expect, it } from 'vitest';
import type * as grpc from '@grpc/grpc-js';
import {
  actionKinds,
  duoWorkflowClientService,
  duoWorkflowService,
  executeWorkflowPath,
  messageTypes,
  protoRoot,
  type Action,
  type ClientEvent,
  type DecodedClientEvent,
} from '../../src/workflow/contract';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { workhorseActionJson } from '../../src/workflow/action-line';
import { decodeProtoJson, encodeProtoJson, fieldJsonName, jsonName, ProtoJsonError } from '../../src/workflow/protojson';

const executeWorkflow = duoWorkflowService['ExecuteWorkflow'] as grpc.MethodDefinition<ClientEvent, Action>;
const clientExecuteWorkflow = duoWorkflowClientService['ExecuteWorkflow'] as grpc.MethodDefinition<ClientEvent, Action>;

/** Hex of what longrun's client (channel-pool.ts) sends for `event`. */
function viaClientSerializer(event: ClientEvent): string {
  return Buffer.from(clientExecuteWorkflow.requestSerialize(event)).toString('hex');
}

/** Hex of a UTF-8 string, for building expected encodings. */
function utf8(text: string): string {
  return Buffer.from(text, 'utf8').toString('hex');
}

/** A length-delimited field: tag byte(s), one-byte length (< 128 here), payload. */
function ld(tagHex: string, payloadHex: string): string {
  const length = payloadHex.length / 2;
  if (length >= 128) throw new Error('test helper handles one-byte lengths only');
  return tagHex + length.toString(16).padStart(2, '0') + payloadHex;
}

function viaProtobufjs(type: keyof typeof messageTypes, object: Record<string, unknown>): string {
  const t = messageTypes[type];
  return Buffer.from(t.encode(t.fromObject(object)).finish()).toString('hex');
}

function viaGrpcRequest(event: ClientEvent): string {
  return executeWorkflow.requestSerialize(event).toString('hex');
}

function viaGrpcResponse(action: Action): string {
  return executeWorkflow.responseSerialize(action).toString('hex');
}

describe('contract: service definition', () => {
  it('is /DuoWorkflow/ExecuteWorkflow, bidirectional streaming', () => {
    expect(executeWorkflow.path).toBe('/DuoWorkflow/ExecuteWorkflow');
    expect(executeWorkflowPath).toBe(executeWorkflow.path);
    expect(executeWorkflow.requestStream).toBe(true);
    expect(executeWorkflow.responseStream).toBe(true);
  });

  it('has every rpc of the real service, with its streaming shape and message types', () => {
    const rpcs = Object.entries(duoWorkflowService).map(([name, m]) => [
      name,
      m.path,
      m.requestStream,
      m.responseStream,
      // proto-loader names the message types of each method.
      (m as unknown as { requestType: { type: { name: string } } }).requestType.type.name,
      (m as unknown as { responseType: { type: { name: string } } }).responseType.type.name,
    ]);
    expect(rpcs).toEqual([
      ['ExecuteWorkflow', '/DuoWorkflow/ExecuteWorkflow', true, true, 'ClientEvent', 'Action'],
      ['GenerateToken', '/DuoWorkflow/GenerateToken', false, false, 'GenerateTokenRequest', 'GenerateTokenResponse'],
      ['ListCapabilities', '/DuoWorkflow/ListCapabilities', false, false, 'ListCapabilitiesRequest', 'ListCapabilitiesResponse'],
      ['ListTools', '/DuoWorkflow/ListTools', false, false, 'ListToolsRequest', 'ListToolsResponse'],
      ['ListFlows', '/DuoWorkflow/ListFlows', false, false, 'ListFlowsRequest', 'ListFlowsResponse'],
      ['TrackSelfHostedExecuteWorkflow', '/DuoWorkflow/TrackSelfHostedExecuteWorkflow', true, true, 'TrackSelfHostedClientEvent', 'TrackSelfHostedAction'],
      ['ValidateFlowConfig', '/DuoWorkflow/ValidateFlowConfig', false, false, 'ValidateFlowConfigRequest', 'ValidateFlowConfigResponse'],
    ]);
  });

  it('keeps the reserved numbers and names (a reused number would misread an old peer)', () => {
    const reserved = (name: string): unknown => protoRoot.lookupType(name).reserved;
    expect(reserved('StartWorkflowRequest')).toEqual([[7, 7]]);
    expect(reserved('ActionResponse')).toEqual([[2, 2], 'response']);
    expect(reserved('RunCommandAction')).toEqual([[1, 1], [2, 2], 'command', 'withGitCredentials']);
    expect(reserved('ListFlowsRequestFilter')).toEqual([[1, 1], 'name']);
    expect(reserved('ValidateFlowConfigRequest')).toEqual([[2, 2], 'schema_version']);
  });

  it('an Action holds no Struct, Value or recursive type (so its ndjson line is bounded by the schema)', () => {
    const seen = new Set<string>();
    const visit = (type: protobuf.Type, chain: string[]): void => {
      expect(type.fullName.startsWith('.google.protobuf.'), `${chain.join(' > ')} reaches ${type.fullName}`).toBe(false);
      expect(chain.includes(type.fullName), `${chain.join(' > ')} is recursive`).toBe(false);
      seen.add(type.fullName);
      for (const field of type.fieldsArray) {
        if (field.resolvedType instanceof protobuf.Type) visit(field.resolvedType, [...chain, type.fullName]);
      }
    };
    visit(messageTypes.Action, []);
    expect(seen).toContain('.TokenBreakdown');
  });

  it('has no proto package', () => {
    expect(protoRoot.lookupService('DuoWorkflow').fullName).toBe('.DuoWorkflow');
  });

  it('lists every Action oneof member in field-number order', () => {
    const action = protoRoot.lookupType('Action');
    const members = action.oneofs['action']?.fieldsArray.map((f) => [f.name, f.id]) ?? [];
    expect(members).toEqual(actionKinds.map((kind, i) => [kind, i + 2]));
  });
});

describe('contract: ClientEvent bytes', () => {
  const startRequest = ld('0a', ld('12', utf8('42')) + ld('22', utf8('fix the bug')));

  it('startRequest (field 1) with workflowID (field 2) and goal (field 4)', () => {
    const event = { startRequest: { workflowID: '42', goal: 'fix the bug' } };
    expect(startRequest).toBe('0a' + '11' + '12023432' + '220b' + utf8('fix the bug'));
    expect(viaProtobufjs('ClientEvent', event)).toBe(startRequest);
    expect(viaGrpcRequest(event)).toBe(startRequest);
  });

  it('stopWorkflow (field 4) with reason (field 1)', () => {
    const expected = '22' + '0b' + '0a09' + utf8('USER_STOP');
    const event = { stopWorkflow: { reason: 'USER_STOP' } };
    expect(viaProtobufjs('ClientEvent', event)).toBe(expected);
    expect(viaGrpcRequest(event)).toBe(expected);
  });

  it('heartbeat (field 3) with an int64 timestamp (varint field 1)', () => {
    // 300 = 0b1_0010_1100 → varint ac 02
    const expected = '1a' + '03' + '08ac02';
    expect(viaProtobufjs('ClientEvent', { heartbeat: { timestamp: 300 } })).toBe(expected);
    expect(viaGrpcRequest({ heartbeat: { timestamp: '300' } })).toBe(expected);
  });

  it('actionResponse (field 2): requestID 1, plainTextResponse 3, httpResponse 4 with map headers 1 and statusCode 2', () => {
    const plain = ld('12', ld('0a', utf8('5')) + ld('1a', ld('12', utf8('no'))));
    expect(viaGrpcRequest({ actionResponse: { requestID: '5', plainTextResponse: { error: 'no' } } })).toBe(plain);

    // Map entry: key field 1, value field 2. statusCode 200 → varint c8 01.
    const entry = ld('0a', utf8('a')) + ld('12', utf8('b'));
    const http = ld('12', ld('0a', utf8('6')) + ld('22', ld('0a', entry) + '10c801' + ld('1a', utf8('ok'))));
    const event = { actionResponse: { requestID: '6', httpResponse: { headers: { a: 'b' }, statusCode: 200, body: 'ok' } } };
    expect(viaGrpcRequest(event)).toBe(http);
    expect(viaProtobufjs('ClientEvent', event)).toBe(http);
    expect(viaClientSerializer(event)).toBe(http);
  });

  it("longrun's own httpResponse answers: encoded without proto-loader's copy, in the bytes proto-loader writes", () => {
    const text = fc.string({ unit: 'grapheme', maxLength: 40 });
    const answer = fc.record(
      {
        headers: fc.dictionary(text, text, { maxKeys: 5 }),
        statusCode: fc.oneof(fc.constantFrom(0, 200, 404, 599), fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 })),
        body: fc.oneof(text, fc.string({ unit: 'grapheme', minLength: 200, maxLength: 3_000 })),
        error: text,
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(text, answer, (requestID, httpResponse) => {
        const event = { actionResponse: { requestID, httpResponse } };
        expect(viaClientSerializer(event)).toBe(viaGrpcRequest(event));
      }),
      { numRuns: 2_000 },
    );
    // Other answers keep proto-loader's serializer.
    const plain = { actionResponse: { requestID: '5', plainTextResponse: { error: 'no' } } };
    expect(viaClientSerializer(plain)).toBe(viaGrpcRequest(plain));
  });

  it('StartWorkflowRequest: approval (10), preapproved_tools (13), streaming (16), resume_checkpoint_ts (17)', () => {
    const request = {
      workflowID: '7',
      approval: { approval: { tool_name: 'x' } },
      preapproved_tools: ['a', 'b'],
      streaming: true,
      resume_checkpoint_ts: '5',
    };
    // Approval.approval (1) → Approved.tool_name (2).
    const approval = ld('52', ld('0a', ld('12', utf8('x'))));
    expect(approval).toBe('5205' + '0a03' + '120178');
    const tools = '6a0161' + '6a0162';
    // Field 16 varint: tag 16<<3|0 = 128 → varint 80 01. Field 17: 136 → 88 01, length-delimited 8a 01.
    const streaming = '8001' + '01';
    const resume = '8a01' + '01' + utf8('5');
    const expected = ld('12', utf8('7')) + approval + tools + streaming + resume;
    expect(viaProtobufjs('StartWorkflowRequest', request)).toBe(expected);
    expect(viaGrpcRequest({ startRequest: request })).toBe(ld('0a', expected));
  });

  it('Approval.rejection (field 2) with message (field 1)', () => {
    const expected = ld('52', ld('12', ld('0a', utf8('no'))));
    expect(expected).toBe('5206' + '1204' + '0a02' + utf8('no'));
    expect(viaProtobufjs('StartWorkflowRequest', { approval: { rejection: { message: 'no' } } })).toBe(expected);
  });

  it('flowConfig (11) is a google.protobuf.Struct: fields map (1) of Value with number_value (2, double)', () => {
    // 1.0 as a little-endian double.
    const value = '11' + '000000000000f03f';
    const entry = ld('0a', utf8('a')) + ld('12', value);
    const expected = ld('5a', ld('0a', entry));
    const request = { flowConfig: { fields: { a: { numberValue: 1 } } } };
    expect(viaProtobufjs('StartWorkflowRequest', request)).toBe(expected);
    expect(viaGrpcRequest({ startRequest: request })).toBe(ld('0a', expected));
  });

  it('mcpTools (8) and additional_context (9)', () => {
    const request = {
      mcpTools: [{ name: 't', trusted: true }],
      additional_context: [{ category: 'file', content: 'c' }],
    };
    // McpTool.trusted is field 6: tag 30 → 0x30, value 01.
    const expected = ld('42', ld('0a', utf8('t')) + '3001') + ld('4a', ld('0a', utf8('file')) + ld('1a', utf8('c')));
    expect(viaProtobufjs('StartWorkflowRequest', request)).toBe(expected);
  });

  it('decodes what it encodes, naming the chosen oneof member', () => {
    const bytes = executeWorkflow.requestSerialize({ stopWorkflow: { reason: 'WORKHORSE_RUN_LIMIT' } });
    const decoded = executeWorkflow.requestDeserialize(bytes) as DecodedClientEvent;
    expect(decoded.response).toBe('stopWorkflow');
    expect(decoded.stopWorkflow).toEqual({ reason: 'WORKHORSE_RUN_LIMIT' });
  });
});

describe('contract: fields upstream added (bytes)', () => {
  it('Approved.approval_source (4, enum varint) and policy_ref (5, PolicyRef{origin 1, file 2, hash 3, version 4})', () => {
    const request = {
      approval: { approval: { approval_source: 'APPROVAL_SOURCE_AUTO_MODE', policy_ref: { origin: 'o', file: 'f', hash: 'h', version: 'v' } } },
    };
    const policy = ld('0a', utf8('o')) + ld('12', utf8('f')) + ld('1a', utf8('h')) + ld('22', utf8('v'));
    // APPROVAL_SOURCE_AUTO_MODE = 3: tag 4<<3|0 = 0x20.
    const expected = ld('52', ld('0a', '2003' + ld('2a', policy)));
    expect(viaProtobufjs('StartWorkflowRequest', request)).toBe(expected);
    expect(viaGrpcRequest({ startRequest: request as never })).toBe(ld('0a', expected));
  });

  it('NewCheckpoint.agent_context_usage (5): map entries of TokenBreakdown{total_tokens 1, max_tokens 2}', () => {
    const action = { requestID: '1', newCheckpoint: { agent_context_usage: { a: { total_tokens: 5, max_tokens: 200 } } } };
    // 200 → varint c8 01.
    const entry = ld('0a', utf8('a')) + ld('12', '0805' + '10c801');
    const expected = ld('0a', utf8('1')) + ld('42', ld('2a', entry));
    expect(viaProtobufjs('Action', action)).toBe(expected);
    expect(viaGrpcResponse(action)).toBe(expected);
  });

  it('trackLlmCallForSelfHosted (16) and scheduleNotification (17) with their real fields', () => {
    // Field 16, length-delimited: tag 130 → varint 82 01; field 17: 138 → 8a 01.
    const track = { requestID: '1', trackLlmCallForSelfHosted: { workflowID: 'w', featureQualifiedName: 'f', featureAiCatalogItem: true } };
    expect(viaGrpcResponse(track)).toBe(ld('0a', utf8('1')) + '8201' + '08' + ld('0a', utf8('w')) + ld('12', utf8('f')) + '1801');
    const schedule = { requestID: '2', scheduleNotification: { task_id: 't', condition: 'c', message: 'm' } };
    expect(viaGrpcResponse(schedule)).toBe(ld('0a', utf8('2')) + '8a01' + '09' + ld('0a', utf8('t')) + ld('12', utf8('c')) + ld('1a', utf8('m')));
  });

  it('ActionResponse.scheduleNotificationResponse (5) with accepted 1, reason 2, fires_at 3', () => {
    const response = { requestID: '3', scheduleNotificationResponse: { accepted: true, reason: 'r', fires_at: 'f' } };
    const expected = ld('12', ld('0a', utf8('3')) + ld('2a', '0801' + ld('12', utf8('r')) + ld('1a', utf8('f'))));
    expect(viaGrpcRequest({ actionResponse: response })).toBe(expected);
  });

  it('McpTool icons (4: Icons{items 1: Icon{url 1, mime_type 2, sizes 3, theme 4}}) and annotations (5)', () => {
    const tool = {
      name: 't',
      icons: { items: [{ url: 'u', mime_type: 'm', sizes: ['s'], theme: 'd' }] },
      annotations: { title: 'T', read_only_hint: false, destructive_hint: true, idempotent_hint: false, open_world_hint: true },
    };
    const icon = ld('0a', utf8('u')) + ld('12', utf8('m')) + ld('1a', utf8('s')) + ld('22', utf8('d'));
    // Optional bools keep an explicit false on the wire.
    const annotations = ld('0a', utf8('T')) + '1000' + '1801' + '2000' + '2801';
    const expected = ld('42', ld('0a', utf8('t')) + ld('22', ld('0a', icon)) + ld('2a', annotations));
    expect(viaProtobufjs('StartWorkflowRequest', { mcpTools: [tool] })).toBe(expected);
  });

  it('RunShellCommand.timeout (2), ReadFile.limit (2) and offset (3), RunCommandAction.timeout (6): optional int64', () => {
    expect(viaGrpcResponse({ requestID: '1', runShellCommand: { command: 'c', timeout: '0' } })).toBe(ld('0a', utf8('1')) + ld('7a', ld('0a', utf8('c')) + '1000'));
    expect(viaGrpcResponse({ requestID: '1', runReadFile: { filepath: 'f', limit: '5', offset: '300' } })).toBe(
      ld('0a', utf8('1')) + ld('22', ld('0a', utf8('f')) + '1005' + '18ac02'),
    );
    expect(viaGrpcResponse({ requestID: '1', runCommand: { program: 'p', timeout: '1' } })).toBe(ld('0a', utf8('1')) + ld('12', ld('1a', utf8('p')) + '3001'));
  });
});

describe('contract: Action bytes', () => {
  it('requestID (1) + newCheckpoint (8) with status (1), checkpoint (2), goal (3), errors (4)', () => {
    const action = { requestID: '1', newCheckpoint: { status: 'RUNNING', checkpoint: '{}', goal: 'g', errors: ['e1'] } };
    const checkpoint = ld('0a', utf8('RUNNING')) + ld('12', utf8('{}')) + ld('1a', utf8('g')) + ld('22', utf8('e1'));
    const expected = ld('0a', utf8('1')) + ld('42', checkpoint);
    expect(expected.slice(0, 10)).toBe('0a0131' + '4214');
    expect(viaProtobufjs('Action', action)).toBe(expected);
    expect(viaGrpcResponse(action)).toBe(expected);
  });

  it('requestID (1) + runHTTPRequest (3) with method (1), path (2), optional body (3)', () => {
    const withBody = { requestID: '7', runHTTPRequest: { method: 'POST', path: '/api/v4/x', body: '{}' } };
    const expected = ld('0a', utf8('7')) + ld('1a', ld('0a', utf8('POST')) + ld('12', utf8('/api/v4/x')) + ld('1a', utf8('{}')));
    expect(viaProtobufjs('Action', withBody)).toBe(expected);
    expect(viaGrpcResponse(withBody)).toBe(expected);

    const noBody = { requestID: '8', runHTTPRequest: { method: 'GET', path: '/' } };
    const expectedNoBody = ld('0a', utf8('8')) + ld('1a', ld('0a', utf8('GET')) + ld('12', utf8('/')));
    expect(viaGrpcResponse(noBody)).toBe(expectedNoBody);
  });

  it('runMCPTool (12) with name (1) and args (2)', () => {
    const action = { requestID: '2', runMCPTool: { name: 'search', args: '{}' } };
    expect(viaGrpcResponse(action)).toBe(ld('0a', utf8('2')) + ld('62', ld('0a', utf8('search')) + ld('12', utf8('{}'))));
  });

  it('decodes an Action naming its kind in `action`; an absent optional body stays absent', () => {
    const bytes = Buffer.from(ld('0a', utf8('8')) + ld('1a', ld('0a', utf8('GET')) + ld('12', utf8('/'))), 'hex');
    const decoded = executeWorkflow.responseDeserialize(bytes) as Action;
    expect(decoded.requestID).toBe('8');
    expect(decoded.action).toBe('runHTTPRequest');
    expect(decoded.runHTTPRequest?.body).toBeUndefined();
  });

  it('skips fields it does not know (a newer service adding fields still decodes)', () => {
    // Action field 99 (varint) is unknown: tag 99<<3 = 792 → varint 98 06.
    const bytes = Buffer.from(ld('0a', utf8('3')) + '980601' + ld('42', ld('0a', utf8('DONE'))), 'hex');
    const decoded = executeWorkflow.responseDeserialize(bytes) as Action;
    expect(decoded.requestID).toBe('3');
    expect(decoded.newCheckpoint).toMatchObject({ status: 'DONE' });
  });
});

describe('protojson: decoding StartWorkflowRequest', () => {
  const type = messageTypes.StartWorkflowRequest;

  const protoNames = {
    clientVersion: '1.0',
    workflowID: '42',
    workflowDefinition: 'chat',
    goal: 'fix the bug',
    workflowMetadata: '{"k":"v"}',
    clientCapabilities: ['streaming'],
    mcpTools: [{ name: 'tool', description: 'd', inputSchema: '{}', trusted: false }],
    additional_context: [{ category: 'file', id: 'a.rb', content: 'puts 1', metadata: '{}' }],
    approval: { approval: { remember_approval: true, tool_name: 'run', tool_args_json: '{"x":1}' } },
    flowConfig: { version: 'v1', nested: { list: [1, 'two', true, null, { deep: [] }] }, empty: {} },
    flowConfigSchemaVersion: 'v1',
    preapproved_tools: ['read_file'],
    flowConfigId: 'cfg',
    flowVersion: '3',
    streaming: true,
    resume_checkpoint_ts: '2025-01-01T00:00:00Z',
  };

  it('names JSON fields as protoc does, unless the contract sets json_name', () => {
    expect(jsonName('additional_context')).toBe('additionalContext');
    expect(jsonName('workflowID')).toBe('workflowID');
    expect(jsonName('tool_args_json')).toBe('toolArgsJson');
    const field = (typeName: string, name: string): protobuf.Field => protoRoot.lookupType(typeName).fields[name] as protobuf.Field;
    // The contract pins these JSON names to the proto names.
    expect(fieldJsonName(field('StartWorkflowRequest', 'additional_context'))).toBe('additional_context');
    expect(fieldJsonName(field('StartWorkflowRequest', 'preapproved_tools'))).toBe('preapproved_tools');
    expect(fieldJsonName(field('StartWorkflowRequest', 'resume_checkpoint_ts'))).toBe('resume_checkpoint_ts');
    expect(fieldJsonName(field('Approval.Approved', 'approval_source'))).toBe('approval_source');
    // ... and leave these to protoc.
    expect(fieldJsonName(field('Icon', 'mime_type'))).toBe('mimeType');
    expect(fieldJsonName(field('ToolAnnotations', 'read_only_hint'))).toBe('readOnlyHint');
    expect(fieldJsonName(field('TokenBreakdown', 'total_tokens'))).toBe('totalTokens');
  });

  it('accepts proto field names', () => {
    const decoded = decodeProtoJson(type, protoNames);
    expect(decoded).toMatchObject({
      workflowID: '42',
      goal: 'fix the bug',
      additional_context: protoNames.additional_context,
      preapproved_tools: ['read_file'],
      resume_checkpoint_ts: '2025-01-01T00:00:00Z',
      approval: { approval: { remember_approval: true, tool_name: 'run', tool_args_json: '{"x":1}' } },
      streaming: true,
    });
  });

  it('accepts the JSON name of a field as well as its proto name', () => {
    const tool = { name: 't', icons: { items: [{ url: 'u', mime_type: 'image/png' }] }, annotations: { read_only_hint: true } };
    const camelTool = { name: 't', icons: { items: [{ url: 'u', mimeType: 'image/png' }] }, annotations: { readOnlyHint: true } };
    expect(decodeProtoJson(type, { mcpTools: [camelTool] })).toEqual(decodeProtoJson(type, { mcpTools: [tool] }));
    expect(decodeProtoJson(type, { mcpTools: [camelTool] })).toEqual({ mcpTools: [tool] });
  });

  it('discards a lowerCamelCase spelling the contract does not name (json_name is the proto name), as Workhorse does', () => {
    const decoded = decodeProtoJson(type, {
      workflowID: '1',
      additionalContext: [{ category: 'file' }],
      preapprovedTools: ['a'],
      resumeCheckpointTs: 'x',
      approval: { approval: { toolName: 'run', rememberApproval: true, approvalSource: 'APPROVAL_SOURCE_AUTO_MODE' } },
    });
    expect(decoded).toEqual({ workflowID: '1', approval: { approval: {} } });
  });

  it('refuses a field given under both its names', () => {
    expect(() => decodeProtoJson(type, { mcpTools: [{ annotations: { read_only_hint: true, readOnlyHint: false } }] })).toThrow(
      /mcpTools\[0\]\.annotations\.read_only_hint: given twice \(as read_only_hint and readOnlyHint\)/,
    );
  });

  it('carries approval_source (enum by name or number) and policy_ref; discards an enum name it does not know', () => {
    const approved = { approval_source: 'APPROVAL_SOURCE_PRETOOLUSE_HOOK', policy_ref: { origin: 'project', file: '.gitlab/duo.yml', hash: 'abc', version: '2' } };
    expect(decodeProtoJson(type, { approval: { approval: approved } })).toEqual({ approval: { approval: approved } });
    expect(decodeProtoJson(type, { approval: { approval: { approval_source: 3 } } })).toEqual({ approval: { approval: { approval_source: 'APPROVAL_SOURCE_AUTO_MODE' } } });
    // A number the contract does not name stays a number (proto3 enums are open).
    expect(decodeProtoJson(type, { approval: { approval: { approval_source: 42 } } })).toEqual({ approval: { approval: { approval_source: 42 } } });
    expect(decodeProtoJson(type, { approval: { approval: { approval_source: 'APPROVAL_SOURCE_FROM_THE_FUTURE', tool_name: 't' } } })).toEqual({
      approval: { approval: { tool_name: 't' } },
    });
    expect(() => decodeProtoJson(type, { approval: { approval: { approval_source: true } } })).toThrow(/approval_source: expected an enum value of ApprovalSource/);
  });

  it('refuses a number no double holds, in flowConfig as elsewhere', () => {
    expect(() => decodeProtoJson(type, { flowConfig: { n: Number.POSITIVE_INFINITY } })).toThrow(/flowConfig\.n: number out of range for a double/);
  });

  it('refuses an unpaired surrogate in a string or a Struct key', () => {
    expect(() => decodeProtoJson(type, { goal: 'a\ud800' })).toThrow(/goal: invalid UTF-16/);
    expect(() => decodeProtoJson(type, { flowConfig: { '\udc00': 1 } })).toThrow(/invalid UTF-16/);
    expect(decodeProtoJson(type, { goal: '\u{1F600}' })).toEqual({ goal: '\u{1F600}' });
  });

  it('keeps a __proto__ key of flowConfig as a key', () => {
    const decoded = decodeProtoJson(type, JSON.parse('{"flowConfig":{"__proto__":{"a":1}}}') as unknown) as { flowConfig: { fields: Record<string, unknown> } };
    expect(Object.keys(decoded.flowConfig.fields)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(decoded.flowConfig.fields)).toBe(Object.prototype);
  });

  it('discards unknown fields at every level', () => {
    const decoded = decodeProtoJson(type, {
      workflowID: '1',
      catalog_items: [{ id: 1 }],
      somethingNew: true,
      approval: { rejection: { message: 'no', reason_code: 3 } },
      additional_context: [{ category: 'x', extra: 'y' }],
    });
    expect(decoded).toEqual({
      workflowID: '1',
      approval: { rejection: { message: 'no' } },
      additional_context: [{ category: 'x' }],
    });
  });

  it('treats null as absent', () => {
    expect(decodeProtoJson(type, { workflowID: '1', goal: null, approval: null })).toEqual({ workflowID: '1' });
  });

  it('turns flowConfig JSON into a google.protobuf.Struct', () => {
    const decoded = decodeProtoJson(type, { flowConfig: { a: 1, b: 'x', c: [true, null], d: { e: {} } } });
    expect(decoded['flowConfig']).toEqual({
      fields: {
        a: { numberValue: 1 },
        b: { stringValue: 'x' },
        c: { listValue: { values: [{ boolValue: true }, { nullValue: 'NULL_VALUE' }] } },
        d: { structValue: { fields: { e: { structValue: { fields: {} } } } } },
      },
    });
  });

  it('forwards either member of the approval oneof', () => {
    expect(decodeProtoJson(type, { approval: { rejection: { message: 'not now' } } })).toEqual({
      approval: { rejection: { message: 'not now' } },
    });
    expect(decodeProtoJson(type, { approval: { approval: {} } })).toEqual({ approval: { approval: {} } });
  });

  it.each([
    [{ goal: 5 }, 'goal', /goal: expected a string/],
    [{ workflowID: true }, 'workflowID', /workflowID: expected a string/],
    [{ streaming: 'yes' }, 'streaming', /streaming: expected a boolean/],
    [{ preapproved_tools: 'read_file' }, 'preapproved_tools', /preapproved_tools: expected a JSON array/],
    [{ preapproved_tools: ['a', 2] }, 'preapproved_tools[1]', /preapproved_tools\[1\]: expected a string/],
    [{ clientCapabilities: ['a', null] }, 'clientCapabilities[1]', /clientCapabilities\[1\]: expected a string/],
    [{ mcpTools: [null] }, 'mcpTools[0]', /mcpTools\[0\]: expected a JSON object, not null/],
    [{ additional_context: [{ id: 3 }] }, 'additional_context[0].id', /additional_context\[0\]\.id/],
    [{ mcpTools: [{ name: 'n', trusted: 'yes' }] }, 'mcpTools[0].trusted', /mcpTools\[0\]\.trusted: expected a boolean/],
    [{ approval: 'yes' }, 'approval', /approval: expected a JSON object/],
    [{ approval: { approval: { tool_name: 1 } } }, 'approval.approval.tool_name', /approval\.approval\.tool_name/],
    [{ approval: { approval: {}, rejection: {} } }, 'approval.rejection', /oneof user_decision already set by approval/],
    [{ flowConfig: [1] }, 'flowConfig', /flowConfig: expected a JSON object \(Struct\)/],
    [{ resume_checkpoint_ts: 17 }, 'resume_checkpoint_ts', /resume_checkpoint_ts: expected a string/],
  ])('rejects %j with a ProtoJsonError naming %s', (json, fieldPath, message) => {
    let caught: unknown;
    try {
      decodeProtoJson(type, json);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ProtoJsonError);
    expect((caught as ProtoJsonError).fieldPath).toBe(fieldPath);
    expect((caught as ProtoJsonError).message).toMatch(message);
  });

  it.each([[null], [[1, 2]], ['text'], [3]])('rejects a body that is not a JSON object: %j', (json) => {
    expect(() => decodeProtoJson(type, json)).toThrow(ProtoJsonError);
  });

  it('round-trips through encodeProtoJson with proto names', () => {
    const decoded = decodeProtoJson(type, protoNames);
    expect(encodeProtoJson(type, decoded, { useProtoNames: true })).toEqual(protoNames);
  });

  it('encodes JSON names by default: json_name where the contract sets it, else lowerCamelCase', () => {
    const decoded = decodeProtoJson(type, { ...protoNames, mcpTools: [{ name: 't', icons: { items: [{ url: 'u', mime_type: 'image/png' }] } }] });
    const encoded = encodeProtoJson(type, decoded) as Record<string, unknown>;
    expect(encoded).toEqual({ ...protoNames, mcpTools: [{ name: 't', icons: { items: [{ url: 'u', mimeType: 'image/png' }] } }] });
    expect(encoded).toHaveProperty('additional_context');
  });

  it('omits empty repeated fields when encoding', () => {
    expect(encodeProtoJson(type, { workflowID: '1', preapproved_tools: [], clientCapabilities: [] })).toEqual({ workflowID: '1' });
  });

  it('survives the gRPC wire: decode → serialize → deserialize → encode gives back the JSON', () => {
    const decoded = decodeProtoJson(type, protoNames);
    const bytes = executeWorkflow.requestSerialize({ startRequest: decoded });
    const received = executeWorkflow.requestDeserialize(bytes) as DecodedClientEvent;
    expect(received.response).toBe('startRequest');
    expect(encodeProtoJson(type, received.startRequest, { useProtoNames: true })).toEqual(protoNames);
    expect(encodeProtoJson(messageTypes.ClientEvent, received, { useProtoNames: true })).toEqual({ startRequest: protoNames });
  });
});

describe('protojson: other messages', () => {
  it('int64 accepts a number or a decimal string and becomes a string; anything else is rejected', () => {
    const type = messageTypes.ClientEvent;
    expect(decodeProtoJson(type, { heartbeat: { timestamp: 1_700_000_000_000 } })).toEqual({ heartbeat: { timestamp: '1700000000000' } });
    expect(decodeProtoJson(type, { heartbeat: { timestamp: '-5' } })).toEqual({ heartbeat: { timestamp: '-5' } });
    expect(() => decodeProtoJson(type, { heartbeat: { timestamp: '1.5' } })).toThrow(/heartbeat\.timestamp: expected an integer/);
    expect(() => decodeProtoJson(type, { heartbeat: { timestamp: 'soon' } })).toThrow(ProtoJsonError);
  });

  it('rejects two members of ClientEvent.response', () => {
    expect(() => decodeProtoJson(messageTypes.ClientEvent, { startRequest: {}, stopWorkflow: { reason: 'x' } })).toThrow(
      /stopWorkflow: oneof response already set by startRequest/,
    );
  });

  it('decodes ActionResponse map headers and int32 statusCode', () => {
    const json = { requestID: '9', httpResponse: { headers: { 'content-type': 'text/plain' }, statusCode: 404, body: 'nope' } };
    const decoded = decodeProtoJson(messageTypes.ActionResponse, json);
    expect(decoded).toEqual(json);
    expect(() => decodeProtoJson(messageTypes.ActionResponse, { httpResponse: { headers: { a: 1 } } })).toThrow(/httpResponse\.headers\.a: expected a string/);
    expect(() => decodeProtoJson(messageTypes.ActionResponse, { httpResponse: { statusCode: 'ok' } })).toThrow(/httpResponse\.statusCode: expected an integer/);
  });

  it('reads integers as protojson does: numbers or numeric strings, exponents allowed, range checked', () => {
    const status = (statusCode: unknown): unknown => decodeProtoJson(messageTypes.ActionResponse, { httpResponse: { statusCode } });
    expect(status('404')).toEqual({ httpResponse: { statusCode: 404 } });
    expect(status(4.04e2)).toEqual({ httpResponse: { statusCode: 404 } });
    expect(status('1e2')).toEqual({ httpResponse: { statusCode: 100 } });
    expect(() => status(2 ** 31)).toThrow(/httpResponse\.statusCode: integer out of range for int32/);
    expect(() => status(1.5)).toThrow(/expected an integer/);
    expect(() => status(' 1')).toThrow(/expected an integer/);
    const timeout = (value: unknown): unknown => decodeProtoJson(messageTypes.Action, { runShellCommand: { timeout: value } });
    expect(timeout('9223372036854775807')).toEqual({ runShellCommand: { timeout: '9223372036854775807' } });
    expect(() => timeout('9223372036854775808')).toThrow(/integer out of range for int64/);
  });

  it('omits absent and empty fields by default (Go protojson without EmitUnpopulated)', () => {
    const received = executeWorkflow.responseDeserialize(
      executeWorkflow.responseSerialize({ requestID: '1', newCheckpoint: { status: 'RUNNING', checkpoint: '{"a":1}', goal: 'g', errors: [] } }),
    );
    expect(JSON.stringify(encodeProtoJson(messageTypes.Action, received))).toBe('{"requestID":"1","newCheckpoint":{"status":"RUNNING","checkpoint":"{\\"a\\":1}","goal":"g"}}');
  });

  it('encodes a received heartbeat int64 as a string', () => {
    const received = executeWorkflow.requestDeserialize(executeWorkflow.requestSerialize({ heartbeat: { timestamp: '42' } }));
    expect(encodeProtoJson(messageTypes.ClientEvent, received)).toEqual({ heartbeat: { timestamp: '42' } });
  });
});

describe('ndjson lines as Workhorse writes them (protojson UseProtoNames + EmitUnpopulated)', () => {
  /** The line for an Action after a trip over the wire, as the gateway sees it. */
  function line(action: Action): string {
    return JSON.stringify(workhorseActionJson(executeWorkflow.responseDeserialize(executeWorkflow.responseSerialize(action))));
  }

  it('a bare checkpoint carries every NewCheckpoint field: empty strings, "errors":[] and "agent_context_usage":{}', () => {
    expect(line({ requestID: '1', newCheckpoint: {} })).toBe('{"requestID":"1","newCheckpoint":{"status":"","checkpoint":"","goal":"","errors":[],"agent_context_usage":{}}}');
  });

  it('writes proto names, declaration order, map keys sorted and zero numbers inside map values', () => {
    const action = {
      requestID: '7',
      newCheckpoint: {
        status: 'RUNNING',
        checkpoint: '{"a":1}',
        goal: 'g',
        errors: ['e1'],
        agent_context_usage: { planner: { total_tokens: 1, max_tokens: 200_000 }, executor: { total_tokens: 5 } },
      },
    };
    expect(line(action)).toBe(
      '{"requestID":"7","newCheckpoint":{"status":"RUNNING","checkpoint":"{\\"a\\":1}","goal":"g","errors":["e1"],' +
        '"agent_context_usage":{"executor":{"total_tokens":5,"max_tokens":0},"planner":{"total_tokens":1,"max_tokens":200000}}}}',
    );
  });

  it('never writes an unset oneof member or an unset optional field; writes a set optional even when zero', () => {
    expect(line({ requestID: '2', runShellCommand: { command: 'ls' } })).toBe('{"requestID":"2","runShellCommand":{"command":"ls"}}');
    expect(line({ requestID: '2', runShellCommand: { command: 'ls', timeout: '0' } })).toBe('{"requestID":"2","runShellCommand":{"command":"ls","timeout":"0"}}');
    expect(line({ requestID: '3', runHTTPRequest: { method: 'GET', path: '/' } })).toBe('{"requestID":"3","runHTTPRequest":{"method":"GET","path":"/"}}');
    expect(line({ requestID: '' })).toBe('{"requestID":""}');
  });

  it('writes proto names where the JSON name differs, zero bools and 64-bit integers as strings', () => {
    expect(line({ requestID: '4', grep: { pattern: 'x' } })).toBe('{"requestID":"4","grep":{"search_directory":"","pattern":"x","case_insensitive":false}}');
    expect(line({ requestID: '5', trackLlmCallForSelfHosted: {} })).toBe(
      '{"requestID":"5","trackLlmCallForSelfHosted":{"workflowID":"","featureQualifiedName":"","featureAiCatalogItem":false}}',
    );
    expect(line({ requestID: '6', runReadFile: { filepath: 'f', limit: '9007199254740993' } })).toBe('{"requestID":"6","runReadFile":{"filepath":"f","limit":"9007199254740993"}}');
    expect(line({ requestID: '8', runCommand: { program: 'p' } })).toBe('{"requestID":"8","runCommand":{"program":"p","arguments":[],"flags":[]}}');
  });

  it('follows the same rules for any message: null for an unset singular message, the zero name of an enum', () => {
    const options = { useProtoNames: true, emitUnpopulated: true };
    expect(JSON.stringify(encodeProtoJson(protoRoot.lookupType('ValidateFlowConfigRequest'), {}, options))).toBe('{"flow_config":null}');
    expect(JSON.stringify(encodeProtoJson(protoRoot.lookupType('HeartbeatRequest'), {}, options))).toBe('{"timestamp":"0"}');
    expect(JSON.stringify(encodeProtoJson(messageTypes.StartWorkflowRequest, {}, options))).toBe(
      '{"clientVersion":"","workflowID":"","workflowDefinition":"","goal":"","workflowMetadata":"","clientCapabilities":[],"mcpTools":[],"additional_context":[],"preapproved_tools":[]}',
    );
    // The contract has no enum without presence; a small type of the same shape shows the rule.
    const root = protobuf.parse(
      'syntax = "proto3"; enum Color { COLOR_UNSET = 0; RED = 1; } message Paint { Color color = 1; optional Color trim = 2; bytes blob = 3; double ratio = 4; }',
      { keepCase: true },
    ).root;
    root.resolveAll();
    const paint = root.lookupType('Paint');
    expect(JSON.stringify(encodeProtoJson(paint, {}, options))).toBe('{"color":"COLOR_UNSET","blob":"","ratio":0}');
    expect(JSON.stringify(encodeProtoJson(paint, { color: 1, trim: 0, blob: Buffer.from('hi'), ratio: Number.NaN }, options))).toBe(
      '{"color":"RED","trim":"COLOR_UNSET","blob":"aGk=","ratio":"NaN"}',
    );
  });

  it('a line a Workhorse client reads back: the proto names decode to the same Action', () => {
    const action = { requestID: '9', newCheckpoint: { status: 'DONE', errors: ['x'], agent_context_usage: { a: { total_tokens: 3, max_tokens: 4 } } } };
    const parsed = JSON.parse(line(action)) as unknown;
    expect(decodeProtoJson(messageTypes.Action, parsed)).toEqual({ ...action, newCheckpoint: { ...action.newCheckpoint, checkpoint: '', goal: '' } });
  });
});
