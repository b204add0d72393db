/**
 * Strict answers: how the simulated workflow service reads a client's ActionResponse.
 * Workhorse checks none of the answers it forwards (runner.go handleClientEvent sends every
 * client event on as it is), so the service is where a wrong answer surfaces; a simulator
 * that only noted it would let a gateway bug pass. An answer of the wrong type for its
 * action, or one a scenario's `expect` does not match, ends the call (simulated-call.ts).
 */
import { isDeepStrictEqual } from 'node:util';
import protobuf from 'protobufjs';
import { messageTypes, type ActionResponse } from '../src/workflow/contract';
import { decodeProtoJson, fieldJsonName, ProtoJsonError } from '../src/workflow/protojson';
import { BadScenario } from './scenario';

/** The answer type the real service reads for an action of `kind` (docs/spec.md §4). */
export function expectedResponseType(kind: string): NonNullable<ActionResponse['response_type']> {
  if (kind === 'runHTTPRequest') return 'httpResponse';
  if (kind === 'scheduleNotification') return 'scheduleNotificationResponse';
  return 'plainTextResponse';
}

/**
 * Why `response` is not the answer a scenario's `expect` (protojson, an ActionResponse)
 * asks for, or undefined when it is: field by field, or whole when `exact`. Throws
 * BadScenario when `expect` is no ActionResponse.
 */
export function answerMismatch(response: ActionResponse, expect: Record<string, unknown>, exact: boolean | undefined): string | undefined {
  let expected: Record<string, unknown>;
  try {
    // protojson discards unknown fields; an expect that named one would match anything.
    const unknown = unknownField(messageTypes.ActionResponse, expect, '');
    if (unknown) throw new BadScenario(`expect names ${unknown}, no field of ActionResponse`);
    expected = canonicalAnswer(decodeProtoJson(messageTypes.ActionResponse, expect));
  } catch (err) {
    if (err instanceof ProtoJsonError) throw new BadScenario(`expect is not an ActionResponse: ${err.message}`);
    throw err;
  }
  const got = canonicalAnswer(response);
  if (exact ? isDeepStrictEqual(got, expected) : contains(got, expected)) return undefined;
  return `${JSON.stringify(got)}, expected ${exact ? '' : 'at least '}${JSON.stringify(expected)}`;
}

/**
 * An ActionResponse as the wire carries it, without its requestID: proto names, no
 * presence or oneof markers, and proto3 zero values absent (an empty string, 0, false,
 * an empty list or map is the same message as none), whether it came from proto-loader
 * or from a scenario's protojson.
 */
function canonicalAnswer(response: Record<string, unknown> | ActionResponse): Record<string, unknown> {
  const type = messageTypes.ActionResponse;
  const plain = type.toObject(type.fromObject({ ...response, requestID: '' }), { longs: String, enums: String, defaults: false });
  return withoutZeros(type, plain);
}

function withoutZeros(type: protobuf.Type, message: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(message)) {
    const field = type.fields[key];
    if (!field) continue;
    field.resolve();
    const nested = field.resolvedType instanceof protobuf.Type ? field.resolvedType : undefined;
    const hasPresence = nested !== undefined || field.options?.['proto3_optional'] === true || (field.partOf !== null && field.partOf !== undefined);
    if (field.map) {
      const entries = Object.entries(value as Record<string, unknown>);
      if (entries.length > 0) out[key] = Object.fromEntries(entries.map(([k, v]) => [k, nested ? withoutZeros(nested, v as Record<string, unknown>) : v]));
    } else if (field.repeated) {
      const items = value as unknown[];
      if (items.length > 0) out[key] = nested ? items.map((v) => withoutZeros(nested, v as Record<string, unknown>)) : items;
    } else if (nested) {
      out[key] = withoutZeros(nested, value as Record<string, unknown>);
    } else if (hasPresence || !isZero(field, value)) {
      out[key] = value;
    }
  }
  return out;
}

function isZero(field: protobuf.Field, value: unknown): boolean {
  if (field.resolvedType instanceof protobuf.Enum) return field.resolvedType.values[String(value)] === 0 || value === 0;
  if (field.type === 'string' || field.type === 'bytes') return value === '' || (typeof value === 'object' && value !== null && (value as { length?: number }).length === 0);
  if (field.type === 'bool') return value === false;
  return value === 0 || value === '0';
}

/** The path of the first key of `json` that is no field of `type` (by proto or JSON name), looked for in nested messages too. */
function unknownField(type: protobuf.Type, json: unknown, path: string): string | undefined {
  if (typeof json !== 'object' || json === null || Array.isArray(json) || type.fullName.startsWith('.google.protobuf.')) return undefined;
  for (const [key, value] of Object.entries(json)) {
    const field = type.fieldsArray.find((f) => f.name === key || fieldJsonName(f) === key);
    const at = path ? `${path}.${key}` : key;
    if (!field) return at;
    field.resolve();
    if (!(field.resolvedType instanceof protobuf.Type) || value === null) continue;
    const nested = field.map ? Object.values(value as object) : field.repeated && Array.isArray(value) ? value : [value];
    for (const item of nested) {
      const found = unknownField(field.resolvedType, item, at);
      if (found) return found;
    }
  }
  return undefined;
}

/** Whether `got` has every field of `want` with its value: objects field by field, everything else (arrays too) whole. */
function contains(got: unknown, want: unknown): boolean {
  if (typeof want !== 'object' || want === null || Array.isArray(want)) return isDeepStrictEqual(got, want);
  if (typeof got !== 'object' || got === null || Array.isArray(got)) return false;
  const have = got as Record<string, unknown>;
  return Object.entries(want).every(([k, v]) => k in have && contains(have[k], v));
}
