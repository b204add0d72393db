/**
 * The JSON Schema (2020-12, as OpenAPI 3.1 reads it) of the contract's messages in protojson,
 * derived from the protobufjs descriptor that src/workflow/protojson.ts walks, by the same
 * rules, in its two directions:
 *
 * - `decode`: what the gateway reads (the execute body, a WebSocket client's frames) — each
 *   field under its proto name or its JSON name, `null` for absent, integers as numbers or
 *   numeric strings, enums by name or number (an unknown name is dropped), unknown fields
 *   dropped (so no `additionalProperties: false`), Struct as any JSON object;
 * - `encode`: what the gateway writes with Workhorse's marshal options (ndjson lines,
 *   WebSocket frames, follow checkpoints: src/workflow/action-line.ts) — proto names only,
 *   every field present but unset oneof members and proto3 `optional` fields, an unset
 *   message field as `null`, 64-bit integers as strings, enums by name.
 *
 * These bodies are not checked with zod and cannot be: protojson accepts two names per field,
 * open enums, numbers as strings and a depth bound measured on the raw bytes, and the
 * decoder's error messages name the field as Go's do (docs/errors.md); a zod schema of the
 * same rules would be a second decoder to keep equal to the first. The descriptor is the
 * one source both the decoder and this schema read; test/unit/openapi-protojson.test.ts
 * holds the two to the same verdict on generated bodies.
 */
import protobuf from 'protobufjs';
import { MAX_JSON_DEPTH, fieldJsonName } from '../src/workflow/protojson';

/** A JSON Schema object (2020-12). */
export type JsonSchema = { [key: string]: unknown };

export type ProtoJsonDirection = 'decode' | 'encode';

const STRUCT = '.google.protobuf.Struct';
const VALUE = '.google.protobuf.Value';
const LIST_VALUE = '.google.protobuf.ListValue';

const int32Range = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  sint32: [-(2 ** 31), 2 ** 31 - 1],
  sfixed32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
  fixed32: [0, 2 ** 32 - 1],
} as const;
const int64Types = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);
/** A JSON number's text (protojson takes numbers as strings too). */
const NUMBER_TEXT = '^-?(?:0|[1-9]\\d*)(?:\\.\\d+)?(?:[eE][+-]?\\d+)?$';
const INTEGER_TEXT = '^-?\\d+$';
const SPECIAL_FLOATS = ['NaN', 'Infinity', '-Infinity'];

/**
 * Collects the JSON Schema of messages of the contract, each a named schema (its message's
 * name) that refers to the others with `$ref: <prefix><Name>`.
 */
export class ProtoJsonSchemas {
  private readonly schemas = new Map<string, JsonSchema>();
  private readonly directions = new Map<string, ProtoJsonDirection>();
  /** The message each name stands for: two messages of one name (nested in different ones) would need two. */
  private readonly fullNames = new Map<string, string>();

  constructor(private readonly refPrefix: string) {}

  /** A `$ref` to `type`'s schema in `direction`, adding it (and what it refers to). */
  ref(type: protobuf.Type, direction: ProtoJsonDirection): JsonSchema {
    const special = this.wellKnown(type);
    if (special) return special;
    const name = type.name;
    const owner = this.fullNames.get(name);
    if (owner !== undefined && owner !== type.fullName) throw new Error(`${owner} and ${type.fullName} would share the schema name ${name}`);
    this.fullNames.set(name, type.fullName);
    const seen = this.directions.get(name);
    if (seen !== undefined && seen !== direction) throw new Error(`${name} is both read and written: its two schemas need two names`);
    if (seen === undefined) {
      this.directions.set(name, direction);
      this.schemas.set(name, {}); // reserved first: a recursive message refers to itself
      this.schemas.set(name, direction === 'decode' ? this.decodeMessage(type) : this.encodeMessage(type));
    }
    return { $ref: `${this.refPrefix}${name}` };
  }

  /** Every schema added, by name, sorted. */
  all(): Record<string, JsonSchema> {
    return Object.fromEntries([...this.schemas].sort(([a], [b]) => a.localeCompare(b)));
  }

  private wellKnown(type: protobuf.Type): JsonSchema | undefined {
    if (type.fullName === STRUCT) return { type: 'object', description: 'google.protobuf.Struct: any JSON object' };
    if (type.fullName === LIST_VALUE) return { type: 'array', description: 'google.protobuf.ListValue: any JSON array' };
    if (type.fullName === VALUE) return { description: 'google.protobuf.Value: any JSON value' };
    return undefined;
  }

  private decodeMessage(type: protobuf.Type): JsonSchema {
    const properties: Record<string, JsonSchema> = {};
    for (const field of type.fieldsArray) {
      const schema = this.decodeField(field);
      const jsonKey = fieldJsonName(field);
      properties[field.name] = jsonKey === field.name ? schema : { ...schema, description: joined(schema['description'], `Also read as \`${jsonKey}\` (not both).`) };
      if (jsonKey !== field.name) properties[jsonKey] = { ...schema, description: joined(schema['description'], `\`${field.name}\` under its JSON name.`) };
    }
    return {
      type: 'object',
      description: joined(
        `protojson ${type.name}, read as Go's protojson.Unmarshal with DiscardUnknown: each field under its proto or its JSON name, \`null\` for absent, unknown fields dropped; nested at most ${MAX_JSON_DEPTH} levels.`,
        oneofNote(type),
      ),
      properties,
    };
  }

  private decodeField(field: protobuf.Field): JsonSchema {
    const single = this.decodeSingle(field);
    if (field instanceof protobuf.MapField) {
      const keys = field.keyType === 'string' ? {} : { propertyNames: { pattern: field.keyType === 'bool' ? '^(true|false)$' : INTEGER_TEXT } };
      return nullable({ type: 'object', ...keys, additionalProperties: single });
    }
    if (field.repeated) return nullable({ type: 'array', items: single });
    // null is a value of google.protobuf.Value, and "absent" for every other field.
    if (field.resolvedType?.fullName === VALUE) return single;
    return nullable(single);
  }

  private decodeSingle(field: protobuf.Field): JsonSchema {
    const resolved = field.resolvedType;
    if (resolved instanceof protobuf.Type) return this.ref(resolved, 'decode');
    if (resolved instanceof protobuf.Enum) {
      return {
        anyOf: [
          { enum: Object.keys(resolved.values) },
          { type: 'integer', minimum: -(2 ** 31), maximum: 2 ** 31 - 1 },
          { type: 'string', description: 'another name: dropped, as if absent' },
        ],
      };
    }
    switch (field.type) {
      case 'string':
        return { type: 'string' };
      case 'bool':
        return { type: 'boolean' };
      case 'bytes':
        return { type: 'string', contentEncoding: 'base64', description: 'base64 or base64url' };
      case 'double':
      case 'float':
        return { anyOf: [{ type: 'number' }, { type: 'string', pattern: NUMBER_TEXT }, { enum: SPECIAL_FLOATS }] };
      default:
        return int64Types.has(field.type)
          ? { anyOf: [{ type: 'integer' }, { type: 'string', pattern: NUMBER_TEXT }], format: field.type.startsWith('u') || field.type === 'fixed64' ? 'uint64' : 'int64' }
          : {
              anyOf: [
                { type: 'integer', ...range(field.type) },
                { type: 'string', pattern: NUMBER_TEXT, description: 'an integer in that range, as text' },
              ],
            };
    }
  }

  private encodeMessage(type: protobuf.Type): JsonSchema {
    const properties: Record<string, JsonSchema> = {};
    const required: string[] = [];
    for (const field of type.fieldsArray) {
      properties[field.name] = this.encodeField(field);
      // Go's EmitUnpopulated writes every field but unset oneof members (proto3 `optional` is one).
      if (!field.partOf) required.push(field.name);
    }
    return {
      type: 'object',
      description: joined(`protojson ${type.name} as Workhorse writes it (proto names, unpopulated fields emitted).`, oneofNote(type)),
      properties,
      ...(required.length > 0 ? { required } : {}),
    };
  }

  private encodeField(field: protobuf.Field): JsonSchema {
    const single = this.encodeSingle(field);
    if (field instanceof protobuf.MapField) return { type: 'object', additionalProperties: single };
    if (field.repeated) return { type: 'array', items: single };
    // An unset singular message field outside any oneof is written as null.
    if (field.resolvedType instanceof protobuf.Type && !field.partOf && field.resolvedType.fullName !== VALUE) return nullable(single);
    return single;
  }

  private encodeSingle(field: protobuf.Field): JsonSchema {
    const resolved = field.resolvedType;
    if (resolved instanceof protobuf.Type) return this.ref(resolved, 'encode');
    if (resolved instanceof protobuf.Enum) return { enum: Object.keys(resolved.values) };
    switch (field.type) {
      case 'string':
        return { type: 'string' };
      case 'bool':
        return { type: 'boolean' };
      case 'bytes':
        return { type: 'string', contentEncoding: 'base64' };
      case 'double':
      case 'float':
        return { anyOf: [{ type: 'number' }, { enum: SPECIAL_FLOATS }] };
      default:
        return int64Types.has(field.type) ? { type: 'string', pattern: INTEGER_TEXT, format: 'int64' } : { type: 'integer', ...range(field.type) };
    }
  }
}

function range(scalar: string): { minimum: number; maximum: number } {
  const bounds = int32Range[scalar as keyof typeof int32Range];
  if (!bounds) throw new Error(`unsupported scalar type ${scalar}`);
  return { minimum: bounds[0], maximum: bounds[1] };
}

function nullable(schema: JsonSchema): JsonSchema {
  if (typeof schema['type'] === 'string' && Object.keys(schema).every((k) => k !== 'anyOf')) return { ...schema, type: [schema['type'], 'null'] };
  return { anyOf: [schema, { type: 'null' }] };
}

function joined(...parts: unknown[]): string {
  return parts.filter((p): p is string => typeof p === 'string' && p !== '').join(' ');
}

/** The message's real oneofs (not proto3 `optional`'s synthetic ones), said in words. */
function oneofNote(type: protobuf.Type): string {
  return type.oneofsArray
    .filter((oneof) => oneof.fieldsArray.some((f) => (f.options as Record<string, unknown> | undefined)?.['proto3_optional'] !== true))
    .map((oneof) => `At most one of ${oneof.fieldsArray.map((f) => `\`${f.name}\``).join(', ')} (oneof ${oneof.name}).`)
    .join(' ');
}
