/**
 * The document's protojson schemas (openapi/protojson-schema.ts) against the code that reads
 * and writes protojson (src/workflow/protojson.ts), on bodies generated from the contract:
 *   - every body the decoder accepts, the schema accepts — generated StartWorkflowRequests and
 *     ClientEvents under either field name, and random JSON objects with the contract's keys;
 *   - a wrong JSON type in any field of the execute body is refused by both;
 *   - every Action the gateway writes (Workhorse's marshal options) is an `Action`, and a
 *     newCheckpoint one a `CheckpointLine`.
 * The schema is looser than the decoder only where JSON Schema cannot say it (a oneof given
 * twice, both names of one field, unpaired surrogates, the depth bound): the description says those.
 */
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../../openapi/document';
import { workhorseActionJson } from '../../src/workflow/action-line';
import { messageTypes } from '../../src/workflow/contract';
import { decodeProtoJson, fieldJsonName } from '../../src/workflow/protojson';
import { schemaValidator } from '../helpers/openapi-validator';
import { messageArbitrary, toProtoJson } from '../helpers/proto-arbitrary';

const document = openApiDocument() as { components: { schemas: Record<string, unknown> } };
const validator = schemaValidator(document);

function decodes(type: protobuf.Type, json: unknown): boolean {
  try {
    decodeProtoJson(type, json);
    return true;
  } catch {
    return false;
  }
}

describe('protojson schemas: what the decoder accepts', () => {
  for (const name of ['StartWorkflowRequest', 'ClientEvent'] as const) {
    it(`accepts every generated ${name} the decoder accepts, under proto or JSON names`, () => {
      const type = messageTypes[name];
      const validate = validator.of(name);
      fc.assert(
        fc.property(messageArbitrary(type), fc.integer(), (message, seed) => {
          const json = toProtoJson(type, message, seed);
          expect(decodes(type, json)).toBe(true);
          expect(validate(json), JSON.stringify(validate.errors)).toBe(true);
        }),
        { numRuns: 150 },
      );
    });
  }

  it('accepts every object of the contract’s keys and any JSON values that the decoder accepts (and the decoder refuses what it refuses)', () => {
    const type = messageTypes.StartWorkflowRequest;
    const validate = validator.of('StartWorkflowRequest');
    const keys = type.fieldsArray.flatMap((f) => [f.name, fieldJsonName(f)]);
    const body = fc.dictionary(fc.constantFrom(...keys, 'unknown_field'), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 });
    let accepted = 0;
    fc.assert(
      fc.property(body, (json) => {
        const valid = validate(json);
        if (decodes(type, json)) {
          accepted += 1;
          expect(valid, `decoded but refused by the schema: ${JSON.stringify(json)} ${JSON.stringify(validate.errors)}`).toBe(true);
        }
      }),
      { numRuns: 400 },
    );
    // The property held on accepted bodies, not vacuously.
    expect(accepted).toBeGreaterThan(20);
  });

  it('refuses a wrong JSON type in any field of the execute body, as the decoder does', () => {
    const type = messageTypes.StartWorkflowRequest;
    const validate = validator.of('StartWorkflowRequest');
    const wrongFor = (field: protobuf.Field): unknown[] => {
      if (field.repeated || field instanceof protobuf.MapField) return [7, 'text', true];
      if (field.resolvedType instanceof protobuf.Type) return field.resolvedType.fullName === '.google.protobuf.Struct' ? [7, 'text', [1]] : [7, 'text', [1]];
      if (field.resolvedType instanceof protobuf.Enum) return [true, {}, 1.5];
      if (field.type === 'string') return [7, true, {}, []];
      if (field.type === 'bool') return ['true', 1, {}];
      return ['x', true, {}];
    };
    let cases = 0;
    for (const field of type.fieldsArray) {
      for (const key of new Set([field.name, fieldJsonName(field)])) {
        for (const wrong of wrongFor(field)) {
          const json = { [key]: wrong };
          cases += 1;
          expect(decodes(type, json), `decoder: ${JSON.stringify(json)}`).toBe(false);
          expect(validate(json), `schema: ${JSON.stringify(json)}`).toBe(false);
        }
      }
    }
    expect(cases).toBeGreaterThan(40);
  });
});

describe('protojson schemas: what the gateway writes', () => {
  it('every generated Action, as Workhorse writes it, is an Action; a newCheckpoint one is a CheckpointLine', () => {
    const action = validator.of('Action');
    const line = validator.of('CheckpointLine');
    fc.assert(
      fc.property(messageArbitrary(messageTypes.Action), (message) => {
        const json = workhorseActionJson(message);
        expect(action(json), JSON.stringify(action.errors)).toBe(true);
        expect(line(json), JSON.stringify(line.errors)).toBe('newCheckpoint' in json);
      }),
      { numRuns: 200 },
    );
  });

  it('an empty newCheckpoint is written with every field (EmitUnpopulated), which the schema requires', () => {
    const json = workhorseActionJson({ requestID: '', newCheckpoint: {} });
    validator.expectValid('CheckpointLine', json);
    const missing = { ...(json as { newCheckpoint: Record<string, unknown> }).newCheckpoint };
    delete missing['errors'];
    expect(validator.of('CheckpointLine')({ ...json, newCheckpoint: missing })).toBe(false);
  });
});
