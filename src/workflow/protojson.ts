/**
 * protojson for the contract's messages, over protobufjs reflection: what Go's
 * protojson does for the shapes the contract uses (messages, oneofs, repeated, maps,
 * 64-bit integers as strings, bytes as base64, google.protobuf.Struct as plain JSON).
 *
 * Decoding accepts both the proto field name and its lowerCamelCase JSON name and
 * discards unknown fields (SPEC §3). The result is the plain-object form that
 * @grpc/proto-loader serializes (proto field names, Struct as {fields}).
 */
import protobuf from 'protobufjs';

export class ProtoJsonError extends Error {
  constructor(
    readonly fieldPath: string,
    detail: string,
  ) {
    super(fieldPath ? `${fieldPath}: ${detail}` : detail);
    this.name = 'ProtoJsonError';
  }
}

/** protoc's JSON name: underscores dropped, the letter after each one upper-cased. */
export function jsonName(protoName: string): string {
  return protoName.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

const STRUCT = '.google.protobuf.Struct';
const VALUE = '.google.protobuf.Value';
const LIST_VALUE = '.google.protobuf.ListValue';

const int32Types = new Set(['int32', 'uint32', 'sint32', 'fixed32', 'sfixed32']);
const int64Types = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);

type Plain = Record<string, unknown>;

function isPlainObject(v: unknown): v is Plain {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ---- decoding (JSON → proto-loader plain object) ----

/** Decodes protojson `json` as a message of `type`; throws ProtoJsonError naming the field. */
export function decodeProtoJson(type: protobuf.Type, json: unknown, path = ''): Plain {
  if (type.fullName === STRUCT) return jsonToStruct(json, path);
  if (!isPlainObject(json)) throw new ProtoJsonError(path, 'expected a JSON object');
  const out: Plain = {};
  const oneofSeen = new Map<string, string>();
  for (const field of type.fieldsArray) {
    const key = field.name in json ? field.name : jsonName(field.name);
    const value = json[key];
    if (value === undefined || value === null) continue;
    const fieldPath = path ? `${path}.${field.name}` : field.name;
    if (field.partOf && !field.partOf.name.startsWith('_')) {
      const other = oneofSeen.get(field.partOf.name);
      if (other !== undefined) {
        throw new ProtoJsonError(fieldPath, `oneof ${field.partOf.name} already set by ${other}`);
      }
      oneofSeen.set(field.partOf.name, field.name);
    }
    out[field.name] = decodeField(field, value, fieldPath);
  }
  return out;
}

function decodeField(field: protobuf.Field, value: unknown, path: string): unknown {
  if (field instanceof protobuf.MapField) {
    if (!isPlainObject(value)) throw new ProtoJsonError(path, 'expected a JSON object (map)');
    const out: Plain = {};
    for (const [k, v] of Object.entries(value)) out[k] = decodeSingle(field, v, `${path}.${k}`);
    return out;
  }
  if (field.repeated) {
    if (!Array.isArray(value)) throw new ProtoJsonError(path, 'expected a JSON array');
    return value.map((v, i) => decodeSingle(field, v, `${path}[${i}]`));
  }
  return decodeSingle(field, value, path);
}

function decodeSingle(field: protobuf.Field, value: unknown, path: string): unknown {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) {
    if (resolved.fullName === VALUE) return jsonToValue(value, path);
    if (resolved.fullName === LIST_VALUE) return jsonToListValue(value, path);
    return decodeProtoJson(resolved, value, path);
  }
  if (resolved instanceof protobuf.Enum) {
    if (typeof value === 'string' && value in resolved.values) return value;
    if (typeof value === 'number' && Number.isInteger(value)) return value;
    throw new ProtoJsonError(path, `expected an enum value of ${resolved.name}`);
  }
  return decodeScalar(field.type, value, path);
}

function decodeScalar(scalar: string, value: unknown, path: string): unknown {
  if (scalar === 'string') {
    if (typeof value !== 'string') throw new ProtoJsonError(path, 'expected a string');
    return value;
  }
  if (scalar === 'bool') {
    if (typeof value !== 'boolean') throw new ProtoJsonError(path, 'expected a boolean');
    return value;
  }
  if (scalar === 'bytes') {
    if (typeof value !== 'string') throw new ProtoJsonError(path, 'expected base64 bytes');
    return Buffer.from(value, 'base64');
  }
  if (int32Types.has(scalar) || int64Types.has(scalar)) {
    const text = typeof value === 'number' ? String(value) : value;
    if (typeof text !== 'string' || !/^-?\d+$/.test(text)) {
      throw new ProtoJsonError(path, 'expected an integer');
    }
    return int64Types.has(scalar) ? text : Number(text);
  }
  if (scalar === 'double' || scalar === 'float') {
    if (typeof value === 'number') return value;
    if (value === 'NaN' || value === 'Infinity' || value === '-Infinity') return Number(value);
    if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) {
      return Number(value);
    }
    throw new ProtoJsonError(path, 'expected a number');
  }
  throw new ProtoJsonError(path, `unsupported scalar type ${scalar}`);
}

function jsonToStruct(json: unknown, path: string): Plain {
  if (!isPlainObject(json)) throw new ProtoJsonError(path, 'expected a JSON object (Struct)');
  const fields: Plain = {};
  for (const [k, v] of Object.entries(json)) fields[k] = jsonToValue(v, `${path}.${k}`);
  return { fields };
}

function jsonToListValue(json: unknown, path: string): Plain {
  if (!Array.isArray(json)) throw new ProtoJsonError(path, 'expected a JSON array (ListValue)');
  return { values: json.map((v, i) => jsonToValue(v, `${path}[${i}]`)) };
}

function jsonToValue(json: unknown, path: string): Plain {
  if (json === null) return { nullValue: 'NULL_VALUE' };
  if (typeof json === 'number') return { numberValue: json };
  if (typeof json === 'string') return { stringValue: json };
  if (typeof json === 'boolean') return { boolValue: json };
  if (Array.isArray(json)) return { listValue: jsonToListValue(json, path) };
  if (isPlainObject(json)) return { structValue: jsonToStruct(json, path) };
  throw new ProtoJsonError(path, 'unsupported JSON value');
}

// ---- encoding (proto-loader plain object → JSON) ----

export interface EncodeOptions {
  /** Emit proto field names instead of lowerCamelCase JSON names (protojson UseProtoNames). */
  useProtoNames?: boolean;
}

/** Encodes a decoded message of `type` as protojson; absent and empty fields are omitted. */
export function encodeProtoJson(type: protobuf.Type, message: unknown, options: EncodeOptions = {}): unknown {
  if (type.fullName === STRUCT) return structToJson(message);
  if (!isPlainObject(message)) return {};
  const out: Plain = {};
  for (const field of type.fieldsArray) {
    const value = message[field.name];
    if (value === undefined || value === null) continue;
    const key = options.useProtoNames ? field.name : jsonName(field.name);
    if (field instanceof protobuf.MapField) {
      const entries = Object.entries(value as Plain);
      if (entries.length === 0) continue;
      out[key] = Object.fromEntries(entries.map(([k, v]) => [k, encodeSingle(field, v, options)]));
    } else if (field.repeated) {
      const list = value as unknown[];
      if (list.length === 0) continue;
      out[key] = list.map((v) => encodeSingle(field, v, options));
    } else {
      out[key] = encodeSingle(field, value, options);
    }
  }
  return out;
}

function encodeSingle(field: protobuf.Field, value: unknown, options: EncodeOptions): unknown {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) {
    if (resolved.fullName === VALUE) return valueToJson(value);
    if (resolved.fullName === LIST_VALUE) return listValueToJson(value);
    return encodeProtoJson(resolved, value, options);
  }
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (int64Types.has(field.type)) return String(value);
  return value;
}

function structToJson(struct: unknown): Plain {
  const fields = isPlainObject(struct) && isPlainObject(struct['fields']) ? struct['fields'] : {};
  const out: Plain = {};
  for (const [k, v] of Object.entries(fields)) out[k] = valueToJson(v);
  return out;
}

function listValueToJson(list: unknown): unknown[] {
  const values = isPlainObject(list) && Array.isArray(list['values']) ? list['values'] : [];
  return values.map(valueToJson);
}

function valueToJson(value: unknown): unknown {
  if (!isPlainObject(value)) return null;
  if ('stringValue' in value && value['stringValue'] !== undefined) return value['stringValue'];
  if ('numberValue' in value && value['numberValue'] !== undefined) return value['numberValue'];
  if ('boolValue' in value && value['boolValue'] !== undefined) return value['boolValue'];
  if ('structValue' in value && value['structValue'] !== undefined) return structToJson(value['structValue']);
  if ('listValue' in value && value['listValue'] !== undefined) return listValueToJson(value['listValue']);
  return null;
}
