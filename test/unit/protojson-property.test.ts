/**
 * Property tests of the contract's reflection path (docs/spec.md §3, §4; issue 9 point 3, issue 11
 * point 3), generated from the loaded proto rather than a field list:
 *   - every message type, with every field set, survives protojson text → decode → the
 *     proto-loader wire → encode (proto names, JSON names, Workhorse's options) unchanged;
 *   - every Action kind survives the gateway's real serializers and comes out as a
 *     Workhorse line with proto names only;
 *   - the body decoder answers any input — random JSON, wrong types, deep nesting, huge
 *     numbers, unicode keys, broken bytes — with a StartWorkflowRequest or INVALID_REQUEST.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import type * as grpc from '@grpc/grpc-js';
import { GatewayError } from '../../src/core/errors';
import { fromRoot } from '../../src/core/paths';
import { decodeStartRequest } from '../../src/run/start-request';
import { WORKHORSE_MARSHAL_OPTIONS, workhorseActionJson } from '../../src/workflow/action-line';
import { actionKinds, duoWorkflowService, loaderOptions, messageTypes, protoRoot, type Action, type ClientEvent } from '../../src/workflow/contract';
import { decodeProtoJson, encodeProtoJson, MAX_JSON_DEPTH } from '../../src/workflow/protojson';
import { hostileBody, nestedText } from '../helpers/hostile-json';
import { messageArbitrary, plainOf, realOneofs, toProtoJson, type Plain } from '../helpers/proto-arbitrary';

const executeWorkflow = duoWorkflowService['ExecuteWorkflow'] as grpc.MethodDefinition<ClientEvent, Action>;

/** Every message type of the contract (the well-known google.protobuf types are reached through them). */
function contractTypes(): protobuf.Type[] {
  const types: protobuf.Type[] = [];
  const walk = (ns: protobuf.NamespaceBase): void => {
    for (const nested of ns.nestedArray) {
      if (nested instanceof protobuf.Type) {
        if (!nested.fullName.startsWith('.google.')) types.push(nested);
        walk(nested);
      } else if (nested instanceof protobuf.Namespace && !nested.fullName.startsWith('.google')) walk(nested);
    }
  };
  walk(protoRoot);
  return types;
}

/** What a proto-loader peer receives for `message`: fromObject → bytes → toObject, as its (de)serializers do. */
function overTheWire(type: protobuf.Type, message: unknown): unknown {
  const bytes = type.encode(type.fromObject(message as Plain)).finish();
  return type.toObject(type.decode(bytes), loaderOptions);
}

function throughText(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

const types = contractTypes();

describe('protojson property: every message type, every field set', () => {
  it('finds the whole contract by reflection', () => {
    expect(types.length).toBeGreaterThanOrEqual(50);
    expect(types.map((t) => t.name)).toEqual(expect.arrayContaining(['StartWorkflowRequest', 'Action', 'ActionResponse', 'NewCheckpoint', 'TokenBreakdown', 'PolicyRef', 'Icon']));
  });

  it('the generator sets every field of every type: all fields outside oneofs, one member of each oneof', () => {
    for (const type of types) {
      for (const message of fc.sample(messageArbitrary(type), 5)) {
        const oneofs = realOneofs(type);
        for (const field of type.fieldsArray) {
          const inOneof = oneofs.find((o) => o.fieldsArray.includes(field));
          if (!inOneof) expect(message[field.name], `${type.name}.${field.name}`).toBeDefined();
        }
        for (const oneof of oneofs)
          expect(
            oneof.fieldsArray.filter((f) => message[f.name] !== undefined),
            `${type.name}.${oneof.name}`,
          ).toHaveLength(1);
      }
    }
  });

  it.each(types.map((t) => [t.fullName.slice(1), t] as const))('%s survives JSON text, the wire and every encoding', (_name, type) => {
    fc.assert(
      fc.property(messageArbitrary(type), fc.integer(), (message, seed) => {
        const decoded = decodeProtoJson(type, throughText(toProtoJson(type, message, seed)));
        const received = overTheWire(type, decoded);
        expect(plainOf(type, received)).toEqual(message);
        for (const options of [{}, { useProtoNames: true }, WORKHORSE_MARSHAL_OPTIONS]) {
          const again = decodeProtoJson(type, throughText(encodeProtoJson(type, received, options)));
          expect(plainOf(type, overTheWire(type, again))).toEqual(message);
        }
      }),
      { numRuns: 15 },
    );
  });
});

describe('protojson property: the gateway serializers', () => {
  it.each(actionKinds)('an Action with %s, every field set, crosses the gRPC serializers and becomes a Workhorse line', (kind) => {
    fc.assert(
      fc.property(messageArbitrary(messageTypes.Action, { choose: { action: kind } }), (action) => {
        const received = executeWorkflow.responseDeserialize(executeWorkflow.responseSerialize(action as Action)) as Action;
        expect(received.action).toBe(kind);
        expect(plainOf(messageTypes.Action, received)).toEqual(action);
        const line = JSON.stringify(workhorseActionJson(received));
        const parsed = JSON.parse(line) as Plain;
        expect(onlyProtoNames(messageTypes.Action, parsed)).toEqual([]);
        expect(plainOf(messageTypes.Action, overTheWire(messageTypes.Action, decodeProtoJson(messageTypes.Action, parsed)))).toEqual(action);
      }),
      { numRuns: 10 },
    );
  });

  it.each(['plainTextResponse', 'httpResponse', 'scheduleNotificationResponse'])('an ActionResponse with %s crosses the gateway serializer unchanged', (member) => {
    fc.assert(
      fc.property(messageArbitrary(messageTypes.ActionResponse, { choose: { response_type: member } }), (response) => {
        const bytes = executeWorkflow.requestSerialize({ actionResponse: response as unknown as ClientEvent extends { actionResponse: infer R } ? R : never });
        const received = executeWorkflow.requestDeserialize(bytes) as { actionResponse?: unknown; response?: string };
        expect(received.response).toBe('actionResponse');
        expect(plainOf(messageTypes.ActionResponse, received.actionResponse)).toEqual(response);
      }),
      { numRuns: 10 },
    );
  });

  it('a StartWorkflowRequest body, every field set under proto or JSON names, reaches the wire unchanged', () => {
    fc.assert(
      fc.property(messageArbitrary(messageTypes.StartWorkflowRequest, { structDepth: 3 }), fc.integer(), (request, seed) => {
        const body = Buffer.from(JSON.stringify(toProtoJson(messageTypes.StartWorkflowRequest, request, seed)));
        const decoded = decodeStartRequest(body);
        const received = executeWorkflow.requestDeserialize(executeWorkflow.requestSerialize({ startRequest: decoded })) as { startRequest?: unknown };
        expect(plainOf(messageTypes.StartWorkflowRequest, received.startRequest)).toEqual(request);
      }),
      { numRuns: 40 },
    );
  });
});

/** Keys of `json` (a protojson object of `type`) that are not proto field names, with their paths. */
function onlyProtoNames(type: protobuf.Type, json: unknown, path = ''): string[] {
  if (type.fullName.startsWith('.google.protobuf.') || typeof json !== 'object' || json === null) return [];
  const wrong: string[] = [];
  for (const [key, value] of Object.entries(json as Plain)) {
    const field = type.fields[key];
    if (!field) {
      wrong.push(`${path}${key}`);
      continue;
    }
    const resolved = field.resolvedType;
    if (!(resolved instanceof protobuf.Type) || value === null) continue;
    const items = field.map ? Object.values(value as Plain) : field.repeated ? (value as unknown[]) : [value];
    for (const item of items) wrong.push(...onlyProtoNames(resolved, item, `${path}${key}.`));
  }
  return wrong;
}

// ---- the body decoder under hostile input ----

describe('protojson property: the execute body decoder never fails unexpectedly', () => {
  it('answers every generated body with a StartWorkflowRequest or INVALID_REQUEST', () => {
    fc.assert(
      fc.property(hostileBody, (body) => {
        try {
          const request = decodeStartRequest(body);
          expect(typeof request).toBe('object');
        } catch (err) {
          expect(err).toBeInstanceOf(GatewayError);
          expect((err as GatewayError).code).toBe('INVALID_REQUEST');
          expect((err as GatewayError).message.length).toBeLessThan(400);
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses nesting one level past MAX_JSON_DEPTH wherever it is, and accepts it at the limit', () => {
    for (const field of ['flowConfig', 'unknownField', 'additional_context']) {
      // The body's own object is level 1.
      const atLimit = Buffer.from(`{"${field}":${nestedText(MAX_JSON_DEPTH - 1, '1', 0xffff)}}`);
      const over = Buffer.from(`{"${field}":${nestedText(MAX_JSON_DEPTH, '1', 0xffff)}}`);
      if (field !== 'additional_context') expect(() => decodeStartRequest(atLimit)).not.toThrow();
      expect(() => decodeStartRequest(over)).toThrow(`request body is nested deeper than ${MAX_JSON_DEPTH} levels`);
    }
  });

  it('refuses a 10 000-level flowConfig, and a million brackets, quickly', () => {
    const started = performance.now();
    expect(() => decodeStartRequest(Buffer.from(`{"flowConfig":${nestedText(10_000, '1', 0xaaaa)}}`))).toThrow(/nested deeper than/);
    expect(() => decodeStartRequest(Buffer.alloc(4 * 1024 * 1024, '['))).toThrow(/nested deeper than/);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('a decoded message deeper than the limit is refused by the encoder too, not recursed into', () => {
    let value: Plain = { numberValue: 1 };
    for (let i = 0; i < 10_000; i++) value = { structValue: { fields: { k: value } } };
    const request = { flowConfig: { fields: { k: value } } };
    expect(() => encodeProtoJson(messageTypes.StartWorkflowRequest, request)).toThrow(/nested deeper than/);
    expect(() => decodeProtoJson(messageTypes.StartWorkflowRequest, throughTextSafe(10_000))).toThrow(/nested deeper than/);
  });

  it('docs/errors.md states the limit the code enforces', () => {
    const doc = readFileSync(fromRoot('docs', 'errors.md'), 'utf8');
    expect(doc).toContain(`**nesting is limited to ${MAX_JSON_DEPTH} levels**`);
    expect(doc).toContain(`nested deeper than ${MAX_JSON_DEPTH} levels`);
  });
});

/** A parsed JSON value nested `depth` objects deep, built without recursion. */
function throughTextSafe(depth: number): Plain {
  let inner: Plain = {};
  for (let i = 0; i < depth; i++) inner = { k: inner };
  return { flowConfig: inner };
}
