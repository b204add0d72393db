/**
 * protojson for the contract's messages over protobufjs reflection, following the rules of
 * Go's google.golang.org/protobuf/encoding/protojson — what Workhorse uses on both sides —
 * so a body Workhorse accepts decodes to the same message here and a message encodes to
 * the JSON a Workhorse client parses.
 *
 * Decoding (Go's UnmarshalOptions{DiscardUnknown: true}): each field is accepted under its
 * proto name and its JSON name (json_name when the .proto sets one, else protoc's
 * lowerCamelCase); unknown fields and unknown enum names are discarded; null means absent
 * (except for google.protobuf.Value, where it is null_value); a field given twice, two
 * members of one oneof, a wrong JSON type, an out-of-range integer or a lone surrogate is
 * an error naming the field. The result is the plain-object form @grpc/proto-loader
 * serializes (proto field names, int64 as string, enums by name, Struct as {fields}).
 *
 * Both directions refuse nesting deeper than MAX_JSON_DEPTH before recursing into it, so no
 * input can exhaust the stack.
 */
import protobuf from 'protobufjs';

/**
 * The deepest JSON nesting (objects and arrays, the body's own object being level 1) that
 * is decoded or encoded; deeper input is an INVALID_REQUEST, never a recursion. Why 32: a
 * JSON level inside flowConfig (a google.protobuf.Struct) costs up to three protobuf
 * message levels on the wire (Struct, map entry, Value), and the workflow service's
 * protobuf runtime (upb, as C++ protobuf) refuses messages nested deeper than 100 levels,
 * so about 32 JSON levels is the deepest body the service can parse at all. Real flow
 * configs nest well under ten levels; the fields of StartWorkflowRequest itself need seven.
 * (Workhorse's Go protojson allows 10 000 message levels; bodies between the two limits
 * could only fail later, at the service.)
 */
export const MAX_JSON_DEPTH = 32;

/** Error messages name the field; a path built from long keys is shortened to this many characters. */
const MAX_PATH_CHARS = 160;

export class ProtoJsonError extends Error {
  constructor(
    readonly fieldPath: string,
    detail: string,
  ) {
    super(fieldPath ? `${shortenPath(fieldPath)}: ${detail}` : detail);
    this.name = 'ProtoJsonError';
  }
}

function shortenPath(path: string): string {
  if (path.length <= MAX_PATH_CHARS) return path;
  const half = MAX_PATH_CHARS / 2;
  return `${path.slice(0, half)}…${path.slice(-half)}`;
}

/** protoc's default JSON name: underscores dropped, the letter after each one upper-cased. */
export function jsonName(protoName: string): string {
  return protoName.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

/** The field's JSON name as protojson writes and reads it: json_name when set, else jsonName(). */
export function fieldJsonName(field: protobuf.Field): string {
  const explicit = optionOf(field, 'json_name');
  return typeof explicit === 'string' ? explicit : jsonName(field.name);
}

function optionOf(field: protobuf.Field, name: string): unknown {
  return (field.options as Record<string, unknown> | undefined)?.[name];
}

/** A proto3 `optional` field: explicit presence through a synthetic oneof. */
function isProto3Optional(field: protobuf.Field): boolean {
  return optionOf(field, 'proto3_optional') === true;
}

/** The oneof a field belongs to, not counting the synthetic oneof of a proto3 `optional`. */
function realOneof(field: protobuf.Field): protobuf.OneOf | null {
  return field.partOf && !isProto3Optional(field) ? field.partOf : null;
}

const STRUCT = '.google.protobuf.Struct';
const VALUE = '.google.protobuf.Value';
const LIST_VALUE = '.google.protobuf.ListValue';
const NULL_VALUE = '.google.protobuf.NullValue';

const intRanges: Record<string, readonly [bigint, bigint]> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  sint32: [-(2n ** 31n), 2n ** 31n - 1n],
  sfixed32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  fixed32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  sint64: [-(2n ** 63n), 2n ** 63n - 1n],
  sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
  fixed64: [0n, 2n ** 64n - 1n],
};
const int64Types = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);
const FLOAT32_MAX = 3.4028234663852886e38;
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
const BASE64 = /^(?:[A-Za-z0-9+/]*|[A-Za-z0-9_-]*)={0,2}$/;
/** With the u flag a surrogate pair is one code point, so this matches unpaired surrogates only. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

type Plain = Record<string, unknown>;

function isPlainObject(v: unknown): v is Plain {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Sets an own enumerable property, even one named `__proto__` (a legal map or Struct key). */
function setKey(target: Plain, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

function enter(depth: number, path: string): void {
  if (depth > MAX_JSON_DEPTH) throw new ProtoJsonError(path, `nested deeper than ${MAX_JSON_DEPTH} levels`);
}

function child(path: string, name: string): string {
  return path ? `${path}.${name}` : name;
}

// ---- decoding (JSON value → proto-loader plain object) ----

/** Marks a value protojson discards (an unknown enum name): the field stays unset. */
const DISCARDED = Symbol('discarded');

/**
 * Decodes protojson `json` (already parsed) as a message of `type`; throws ProtoJsonError
 * naming the field. `path` prefixes the field names in error messages.
 */
export function decodeProtoJson(type: protobuf.Type, json: unknown, path = ''): Plain {
  return decodeMessage(type, json, path, 1) as Plain;
}

function decodeMessage(type: protobuf.Type, json: unknown, path: string, depth: number): unknown {
  if (type.fullName === STRUCT) return jsonToStruct(json, path, depth);
  if (type.fullName === LIST_VALUE) return jsonToListValue(json, path, depth);
  if (type.fullName === VALUE) return jsonToValue(json, path, depth);
  enter(depth, path);
  if (!isPlainObject(json)) throw new ProtoJsonError(path, 'expected a JSON object');
  const out: Plain = {};
  const oneofSeen = new Map<string, string>();
  for (const field of type.fieldsArray) {
    const protoKey = field.name;
    const jsonKey = fieldJsonName(field);
    const hasProto = Object.hasOwn(json, protoKey);
    const hasJson = jsonKey !== protoKey && Object.hasOwn(json, jsonKey);
    if (!hasProto && !hasJson) continue;
    const fieldPath = child(path, field.name);
    if (hasProto && hasJson) throw new ProtoJsonError(fieldPath, `given twice (as ${protoKey} and ${jsonKey})`);
    const value = json[hasProto ? protoKey : jsonKey];
    if (value === null && !acceptsNull(field)) continue;
    const oneof = realOneof(field);
    if (oneof) {
      const other = oneofSeen.get(oneof.name);
      if (other !== undefined) throw new ProtoJsonError(fieldPath, `oneof ${oneof.name} already set by ${other}`);
      oneofSeen.set(oneof.name, field.name);
    }
    const decoded = decodeField(field, value, fieldPath, depth);
    if (decoded !== DISCARDED) out[field.name] = decoded;
  }
  return out;
}

function acceptsNull(field: protobuf.Field): boolean {
  const resolved = field.resolvedType;
  return !field.repeated && !field.map && resolved !== null && (resolved.fullName === VALUE || resolved.fullName === NULL_VALUE);
}

function decodeField(field: protobuf.Field, value: unknown, path: string, depth: number): unknown {
  if (field instanceof protobuf.MapField) {
    enter(depth + 1, path);
    if (!isPlainObject(value)) throw new ProtoJsonError(path, 'expected a JSON object (map)');
    const out: Plain = {};
    for (const key of Object.keys(value)) {
      const entryPath = child(path, key);
      const mapKey = decodeMapKey(field.keyType, key, entryPath);
      const decoded = decodeSingle(field, value[key], entryPath, depth + 1);
      if (decoded !== DISCARDED) setKey(out, mapKey, decoded);
    }
    return out;
  }
  if (field.repeated) {
    enter(depth + 1, path);
    if (!Array.isArray(value)) throw new ProtoJsonError(path, 'expected a JSON array');
    const out: unknown[] = [];
    value.forEach((v: unknown, i) => {
      const decoded = decodeSingle(field, v, `${path}[${i}]`, depth + 1);
      if (decoded !== DISCARDED) out.push(decoded);
    });
    return out;
  }
  return decodeSingle(field, value, path, depth);
}

function decodeMapKey(keyType: string, key: string, path: string): string {
  if (keyType === 'string') {
    checkUtf16(key, path);
    return key;
  }
  if (keyType === 'bool') {
    if (key === 'true' || key === 'false') return key;
    throw new ProtoJsonError(path, 'expected a bool map key');
  }
  if (!/^-?\d+$/.test(key)) throw new ProtoJsonError(path, `expected a ${keyType} map key`);
  return String(inRange(BigInt(key), keyType, path));
}

/** One value of a field (an element, for repeated and map fields); `depth` is its parent's. */
function decodeSingle(field: protobuf.Field, value: unknown, path: string, depth: number): unknown {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) {
    if (value === null && resolved.fullName !== VALUE) throw new ProtoJsonError(path, 'expected a JSON object, not null');
    return decodeMessage(resolved, value, path, depth + 1);
  }
  if (resolved instanceof protobuf.Enum) return decodeEnum(resolved, value, path);
  return decodeScalar(field.type, value, path);
}

function decodeEnum(type: protobuf.Enum, value: unknown, path: string): unknown {
  if (type.fullName === NULL_VALUE && value === null) return 'NULL_VALUE';
  if (typeof value === 'string') {
    // Go's DiscardUnknown drops an enum name it does not know, as it drops unknown fields.
    if (!Object.hasOwn(type.values, value)) return DISCARDED;
    return value;
  }
  if (typeof value === 'number' && Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31) {
    return type.valuesById[value] ?? value;
  }
  throw new ProtoJsonError(path, `expected an enum value of ${type.name}`);
}

function decodeScalar(scalar: string, value: unknown, path: string): unknown {
  switch (scalar) {
    case 'string':
      if (typeof value !== 'string') throw new ProtoJsonError(path, 'expected a string');
      checkUtf16(value, path);
      return value;
    case 'bool':
      if (typeof value !== 'boolean') throw new ProtoJsonError(path, 'expected a boolean');
      return value;
    case 'bytes':
      if (typeof value !== 'string' || !BASE64.test(value)) throw new ProtoJsonError(path, 'expected base64 bytes');
      return Buffer.from(value, value.includes('-') || value.includes('_') ? 'base64url' : 'base64');
    case 'double':
    case 'float':
      return decodeFloat(scalar, value, path);
    default: {
      if (!(scalar in intRanges)) throw new ProtoJsonError(path, `unsupported scalar type ${scalar}`);
      const n = inRange(parseInteger(value, path), scalar, path);
      return int64Types.has(scalar) ? n.toString() : Number(n);
    }
  }
}

/** A JSON number, or a string holding one (protojson accepts both), as an exact integer. */
function parseInteger(value: unknown, path: string): bigint {
  if (typeof value === 'number' && Number.isInteger(value)) return BigInt(value);
  if (typeof value === 'string' && JSON_NUMBER.test(value)) {
    if (/^-?\d+$/.test(value)) return BigInt(value);
    const n = Number(value);
    if (Number.isInteger(n)) return BigInt(n);
  }
  throw new ProtoJsonError(path, 'expected an integer');
}

function inRange(n: bigint, scalar: string, path: string): bigint {
  const range = intRanges[scalar];
  if (!range || n < range[0] || n > range[1]) throw new ProtoJsonError(path, `integer out of range for ${scalar}`);
  return n;
}

function decodeFloat(scalar: string, value: unknown, path: string): number {
  let n: number | undefined;
  if (typeof value === 'number') n = value;
  else if (value === 'NaN' || value === 'Infinity' || value === '-Infinity') return Number(value);
  else if (typeof value === 'string' && JSON_NUMBER.test(value)) n = Number(value);
  // JSON.parse turns a number too large for a double into ±Infinity; Go reports it out of range.
  if (n === undefined || !Number.isFinite(n)) throw new ProtoJsonError(path, 'expected a finite number');
  if (scalar === 'float' && Math.abs(n) > FLOAT32_MAX) throw new ProtoJsonError(path, 'number out of range for float');
  return n;
}

function checkUtf16(text: string, path: string): void {
  if (LONE_SURROGATE.test(text)) throw new ProtoJsonError(path, 'invalid UTF-16: unpaired surrogate');
}

function jsonToStruct(json: unknown, path: string, depth: number): Plain {
  enter(depth, path);
  if (!isPlainObject(json)) throw new ProtoJsonError(path, 'expected a JSON object (Struct)');
  const fields: Plain = {};
  for (const key of Object.keys(json)) {
    const entryPath = child(path, key);
    checkUtf16(key, entryPath);
    setKey(fields, key, jsonToValue(json[key], entryPath, depth + 1));
  }
  return { fields };
}

function jsonToListValue(json: unknown, path: string, depth: number): Plain {
  enter(depth, path);
  if (!Array.isArray(json)) throw new ProtoJsonError(path, 'expected a JSON array (ListValue)');
  return { values: json.map((v: unknown, i) => jsonToValue(v, `${path}[${i}]`, depth + 1)) };
}

/** A google.protobuf.Value; `depth` is the level the value itself would occupy. */
function jsonToValue(json: unknown, path: string, depth: number): Plain {
  if (json === null) return { nullValue: 'NULL_VALUE' };
  if (typeof json === 'number') {
    if (!Number.isFinite(json)) throw new ProtoJsonError(path, 'number out of range for a double');
    return { numberValue: json };
  }
  if (typeof json === 'string') {
    checkUtf16(json, path);
    return { stringValue: json };
  }
  if (typeof json === 'boolean') return { boolValue: json };
  if (Array.isArray(json)) return { listValue: jsonToListValue(json, path, depth) };
  if (isPlainObject(json)) return { structValue: jsonToStruct(json, path, depth) };
  throw new ProtoJsonError(path, 'unsupported JSON value');
}

// ---- encoding (proto-loader plain object → JSON value) ----

export interface EncodeOptions {
  /** Proto field names instead of JSON names (Go's UseProtoNames). */
  useProtoNames?: boolean;
  /**
   * Also write unpopulated fields (Go's EmitUnpopulated): scalars without presence as their
   * zero value ("", 0, false, "0" for 64-bit integers, the enum's zero name), repeated as
   * [], maps as {}, a singular message field outside any oneof as null. Unset oneof
   * members and unset proto3 `optional` fields stay absent, as in Go.
   */
  emitUnpopulated?: boolean;
}

/**
 * Encodes a message of `type` (as proto-loader decodes it) as a protojson value, fields in
 * declaration order and map keys sorted, as Go writes them. Throws ProtoJsonError only for
 * what Go's protojson refuses to write too: a google.protobuf.Value with no kind set, a
 * NaN or infinite number in a Value, or nesting deeper than MAX_JSON_DEPTH.
 */
export function encodeProtoJson(type: protobuf.Type, message: unknown, options: EncodeOptions = {}): unknown {
  return encodeMessage(type, message, options, '', 1);
}

function encodeMessage(type: protobuf.Type, message: unknown, options: EncodeOptions, path: string, depth: number): unknown {
  if (type.fullName === STRUCT) return structToJson(message, path, depth);
  if (type.fullName === LIST_VALUE) return listValueToJson(message, path, depth);
  if (type.fullName === VALUE) return valueToJson(message, path, depth);
  enter(depth, path);
  const msg = isPlainObject(message) ? message : {};
  const out: Plain = {};
  for (const field of type.fieldsArray) {
    const key = options.useProtoNames ? field.name : fieldJsonName(field);
    const fieldPath = child(path, field.name);
    const raw = msg[field.name];
    const value = raw === null ? undefined : raw;
    if (field instanceof protobuf.MapField) {
      const entries = isPlainObject(value) ? Object.keys(value).sort(byCodePoint) : [];
      if (entries.length === 0 && !options.emitUnpopulated) continue;
      enter(depth + 1, fieldPath);
      const map: Plain = {};
      for (const k of entries) setKey(map, k, encodeSingle(field, (value as Plain)[k], options, child(fieldPath, k), depth + 1));
      out[key] = map;
    } else if (field.repeated) {
      const list = Array.isArray(value) ? value : [];
      if (list.length === 0 && !options.emitUnpopulated) continue;
      enter(depth + 1, fieldPath);
      out[key] = list.map((v: unknown, i) => encodeSingle(field, v, options, `${fieldPath}[${i}]`, depth + 1));
    } else if (field.partOf || field.resolvedType instanceof protobuf.Type) {
      // Explicit presence: written when set, whatever its value.
      if (value !== undefined) out[key] = encodeSingle(field, value, options, fieldPath, depth);
      else if (options.emitUnpopulated && !field.partOf) out[key] = null;
    } else if (value !== undefined && !isZeroScalar(field, value)) {
      out[key] = encodeSingle(field, value, options, fieldPath, depth);
    } else if (options.emitUnpopulated) {
      out[key] = zeroScalar(field);
    }
  }
  return out;
}

/** Go's map key order for string keys: byte order of UTF-8, which is code point order. */
function byCodePoint(a: string, b: string): number {
  const ai = a[Symbol.iterator]();
  const bi = b[Symbol.iterator]();
  for (;;) {
    const x = ai.next();
    const y = bi.next();
    if (x.done || y.done) return x.done === y.done ? 0 : x.done ? -1 : 1;
    const d = (x.value.codePointAt(0) ?? 0) - (y.value.codePointAt(0) ?? 0);
    if (d !== 0) return d;
  }
}

function isZeroScalar(field: protobuf.Field, value: unknown): boolean {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Enum) return value === 0 || (typeof value === 'string' && resolved.values[value] === 0);
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return value.length === 0;
  if (field.type === 'string') return value === '';
  if (field.type === 'bool') return value === false;
  return String(value) === '0';
}

function zeroScalar(field: protobuf.Field): unknown {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Enum) return resolved.valuesById[0] ?? 0;
  if (field.type === 'string' || field.type === 'bytes') return '';
  if (field.type === 'bool') return false;
  return int64Types.has(field.type) ? '0' : 0;
}

function encodeSingle(field: protobuf.Field, value: unknown, options: EncodeOptions, path: string, depth: number): unknown {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) return encodeMessage(resolved, value, options, path, depth + 1);
  if (resolved instanceof protobuf.Enum) {
    if (resolved.fullName === NULL_VALUE) return null;
    if (typeof value === 'number') return resolved.valuesById[value] ?? value;
    return value;
  }
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (int64Types.has(field.type)) return String(value);
  if (field.type === 'double' || field.type === 'float') {
    const n = Number(value);
    if (Number.isNaN(n)) return 'NaN';
    if (!Number.isFinite(n)) return n > 0 ? 'Infinity' : '-Infinity';
    return n;
  }
  return value;
}

function structToJson(struct: unknown, path: string, depth: number): Plain {
  enter(depth, path);
  const fields = isPlainObject(struct) && isPlainObject(struct['fields']) ? struct['fields'] : {};
  const out: Plain = {};
  for (const k of Object.keys(fields).sort(byCodePoint)) setKey(out, k, valueToJson(fields[k], child(path, k), depth + 1));
  return out;
}

function listValueToJson(list: unknown, path: string, depth: number): unknown[] {
  enter(depth, path);
  const values: unknown[] = isPlainObject(list) && Array.isArray(list['values']) ? list['values'] : [];
  return values.map((v, i) => valueToJson(v, `${path}[${i}]`, depth + 1));
}

function valueToJson(value: unknown, path: string, depth: number): unknown {
  const v = isPlainObject(value) ? value : {};
  if (v['nullValue'] !== undefined && v['nullValue'] !== null) return null;
  if (typeof v['numberValue'] === 'number') {
    if (!Number.isFinite(v['numberValue'])) throw new ProtoJsonError(path, 'google.protobuf.Value: NaN and infinite numbers have no JSON form');
    return v['numberValue'];
  }
  if (typeof v['stringValue'] === 'string') return v['stringValue'];
  if (typeof v['boolValue'] === 'boolean') return v['boolValue'];
  if (isPlainObject(v['structValue'])) return structToJson(v['structValue'], path, depth);
  if (isPlainObject(v['listValue'])) return listValueToJson(v['listValue'], path, depth);
  throw new ProtoJsonError(path, 'google.protobuf.Value: none of the oneof fields is set');
}
