/**
 * The DuoWorkflow contract (SPEC §4) on the wire, and protojson (SPEC §3).
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
  duoWorkflowService,
  executeWorkflowPath,
  messageTypes,
  protoRoot,
  type Action,
  type ClientEvent,
  type DecodedClientEvent,
} from '../src/workflow/contract';
import { decodeProtoJson, encodeProtoJson, jsonName, ProtoJsonError } from '../src/workflow/protojson';

const executeWorkflow = duoWorkflowService['ExecuteWorkflow'] as grpc.MethodDefinition<ClientEvent, Action>;

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
    expect(Object.keys(duoWorkflowService)).toEqual(['ExecuteWorkflow']);
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

  const { additional_context, preapproved_tools, resume_checkpoint_ts, ...sameInBoth } = protoNames;
  const camelNames = {
    ...sameInBoth,
    approval: { approval: { rememberApproval: true, toolName: 'run', toolArgsJson: '{"x":1}' } },
    additionalContext: additional_context,
    preapprovedTools: preapproved_tools,
    resumeCheckpointTs: resume_checkpoint_ts,
  };

  it('names JSON fields as protoc does', () => {
    expect(jsonName('additional_context')).toBe('additionalContext');
    expect(jsonName('preapproved_tools')).toBe('preapprovedTools');
    expect(jsonName('resume_checkpoint_ts')).toBe('resumeCheckpointTs');
    expect(jsonName('workflowID')).toBe('workflowID');
    expect(jsonName('tool_args_json')).toBe('toolArgsJson');
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

  it('accepts lowerCamelCase JSON names and decodes them to the same message', () => {
    expect(decodeProtoJson(type, camelNames)).toEqual(decodeProtoJson(type, protoNames));
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
    [{ preapprovedTools: ['a', 2] }, 'preapproved_tools[1]', /preapproved_tools\[1\]: expected a string/],
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

  it('encodes lowerCamelCase JSON names by default', () => {
    const decoded = decodeProtoJson(type, protoNames);
    const encoded = encodeProtoJson(type, decoded) as Record<string, unknown>;
    expect(encoded).toEqual(camelNames);
    expect(encoded).not.toHaveProperty('additional_context');
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

  it('encodes a received newCheckpoint Action as the ndjson line blocking mode writes', () => {
    const bytes = executeWorkflow.responseSerialize({
      requestID: '1',
      newCheckpoint: { status: 'RUNNING', checkpoint: '{"a":1}', goal: 'g', errors: [] },
    });
    const received = executeWorkflow.responseDeserialize(bytes);
    expect(JSON.stringify(encodeProtoJson(messageTypes.Action, received))).toBe(
      '{"requestID":"1","newCheckpoint":{"status":"RUNNING","checkpoint":"{\\"a\\":1}","goal":"g"}}',
    );
  });

  it('encodes a received heartbeat int64 as a string', () => {
    const received = executeWorkflow.requestDeserialize(executeWorkflow.requestSerialize({ heartbeat: { timestamp: '42' } }));
    expect(encodeProtoJson(messageTypes.ClientEvent, received)).toEqual({ heartbeat: { timestamp: '42' } });
  });
});
