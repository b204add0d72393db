/**
 * fast-check generators driven by the loaded contract (protobufjs reflection), not by a
 * hand-written field list: a message of any type with every field set — nested messages,
 * repeated fields, maps, one member of each oneof, google.protobuf.Struct values — in the
 * plain-object form @grpc/proto-loader serializes. A field the contract gains upstream is
 * generated (and so tested) without touching this file.
 *
 * Also, written here independently of src/workflow/protojson.ts so a shared mistake cannot
 * hide: the protojson text of such a message (proto or JSON names, int64 as string or
 * number) and the reduction of a proto-loader-decoded object to the same plain form.
 */
import fc from 'fast-check';
import protobuf from 'protobufjs';

export type Plain = Record<string, unknown>;

const STRUCT = '.google.protobuf.Struct';
const VALUE = '.google.protobuf.Value';
const LIST_VALUE = '.google.protobuf.ListValue';

export interface GenOptions {
  /** Elements of a repeated field, entries of a map (at least one each). */
  maxItems?: number;
  /** Characters of a generated string. */
  maxChars?: number;
  /** Nesting of a generated Struct (objects and arrays inside it). */
  structDepth?: number;
  /** Force the member chosen for a oneof of the top-level message: oneof name → member. */
  choose?: Record<string, string>;
}

function isProto3Optional(field: protobuf.Field): boolean {
  return (field.options as Record<string, unknown> | undefined)?.['proto3_optional'] === true;
}

/** Fields with presence keep a zero value on the wire; the others must be non-zero to be "set". */
function hasPresence(field: protobuf.Field): boolean {
  return field.partOf !== null || field.resolvedType instanceof protobuf.Type;
}

/** Real (non-synthetic) oneofs of a type with their members. */
export function realOneofs(type: protobuf.Type): protobuf.OneOf[] {
  return type.oneofsArray.filter((o) => !o.fieldsArray.every(isProto3Optional));
}

const int32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });

function scalarArbitrary(field: protobuf.Field, nonZero: boolean, opts: Required<Omit<GenOptions, 'choose'>>): fc.Arbitrary<unknown> {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Enum) {
    const names = Object.keys(resolved.values).filter((n) => !nonZero || resolved.values[n] !== 0);
    return fc.constantFrom(...names);
  }
  const keep = <T>(arb: fc.Arbitrary<T>, zero: (v: T) => boolean): fc.Arbitrary<T> => (nonZero ? arb.filter((v) => !zero(v)) : arb);
  switch (field.type) {
    case 'string':
      return fc.string({ unit: 'binary', minLength: nonZero ? 1 : 0, maxLength: opts.maxChars });
    case 'bool':
      return nonZero ? fc.constant(true) : fc.boolean();
    case 'bytes':
      return fc.uint8Array({ minLength: nonZero ? 1 : 0, maxLength: opts.maxChars }).map((b) => Buffer.from(b));
    case 'int32':
    case 'sint32':
    case 'sfixed32':
      return keep(int32, (v) => v === 0);
    case 'uint32':
    case 'fixed32':
      return keep(fc.integer({ min: 0, max: 2 ** 32 - 1 }), (v) => v === 0);
    case 'int64':
    case 'sint64':
    case 'sfixed64':
      return keep(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), (v) => v === 0n).map(String);
    case 'uint64':
    case 'fixed64':
      return keep(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), (v) => v === 0n).map(String);
    case 'double':
      return keep(fc.double({ noNaN: true, noDefaultInfinity: true }), (v) => v === 0);
    case 'float':
      return keep(fc.float({ noNaN: true, noDefaultInfinity: true }), (v) => v === 0);
    default:
      throw new Error(`no generator for scalar type ${field.type}`);
  }
}

/** A JSON value of bounded depth, as a google.protobuf.Value in proto-loader form. */
export function valueArbitrary(depth: number, opts: Required<Omit<GenOptions, 'choose'>>): fc.Arbitrary<Plain> {
  const leaves: Array<fc.Arbitrary<Plain>> = [
    fc.constant({ nullValue: 'NULL_VALUE' }),
    fc.boolean().map((b) => ({ boolValue: b })),
    // -0 has no JSON text of its own (JSON.stringify writes 0), so it cannot survive a body.
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => ({ numberValue: n === 0 ? 0 : n })),
    fc.string({ unit: 'binary', maxLength: opts.maxChars }).map((s) => ({ stringValue: s })),
  ];
  if (depth <= 0) return fc.oneof(...leaves);
  return fc.oneof(
    ...leaves,
    structArbitrary(depth - 1, opts).map((s) => ({ structValue: s })),
    listValueArbitrary(depth - 1, opts).map((listValue) => ({ listValue })),
  );
}

export function structArbitrary(depth: number, opts: Required<Omit<GenOptions, 'choose'>>): fc.Arbitrary<Plain> {
  return fc
    .dictionary(fc.string({ unit: 'binary', maxLength: opts.maxChars }), valueArbitrary(depth, opts), { maxKeys: opts.maxItems, noNullPrototype: true })
    .map((fields) => (Object.keys(fields).length > 0 ? { fields } : {}));
}

/** Empty maps and lists are not on the wire at all: an empty Struct or ListValue is `{}`. */
export function listValueArbitrary(depth: number, opts: Required<Omit<GenOptions, 'choose'>>): fc.Arbitrary<Plain> {
  return fc.array(valueArbitrary(depth, opts), { maxLength: opts.maxItems }).map((values) => (values.length > 0 ? { values } : {}));
}

function singleArbitrary(field: protobuf.Field, nonZero: boolean, opts: Required<Omit<GenOptions, 'choose'>>, depth: number): fc.Arbitrary<unknown> {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) {
    if (resolved.fullName === STRUCT) return structArbitrary(opts.structDepth, opts);
    if (resolved.fullName === VALUE) return valueArbitrary(opts.structDepth, opts);
    if (resolved.fullName === LIST_VALUE) return listValueArbitrary(opts.structDepth, opts);
    return messageArbitrary(resolved, opts, depth + 1);
  }
  return scalarArbitrary(field, nonZero, opts);
}

/**
 * A message of `type` with every field set (one member per oneof): non-zero values for
 * fields without presence (a zero would not be on the wire at all), any value for fields
 * with presence (a zero must survive), at least one element in repeated fields and maps.
 */
export function messageArbitrary(type: protobuf.Type, options: GenOptions = {}, depth = 0): fc.Arbitrary<Plain> {
  if (depth > 12) throw new Error(`${type.fullName}: message nesting deeper than the contract has`);
  const opts = { maxItems: options.maxItems ?? 2, maxChars: options.maxChars ?? 8, structDepth: options.structDepth ?? 2 };
  const oneofs = realOneofs(type);
  const chosen = fc.record(
    Object.fromEntries(
      oneofs.map((o) => {
        const forced = depth === 0 ? options.choose?.[o.name] : undefined;
        return [o.name, forced ? fc.constant(forced) : fc.constantFrom(...o.fieldsArray.map((f) => f.name))];
      }),
    ) as Record<string, fc.Arbitrary<string>>,
  );
  return chosen.chain((choice) => {
    const parts: Record<string, fc.Arbitrary<unknown>> = {};
    for (const field of type.fieldsArray) {
      const oneof = field.partOf && !isProto3Optional(field) ? field.partOf : null;
      if (oneof && choice[oneof.name] !== field.name) continue;
      const nonZero = !hasPresence(field);
      if (field instanceof protobuf.MapField) {
        const key = field.keyType === 'string' ? fc.string({ unit: 'binary', maxLength: opts.maxChars }) : fc.integer({ min: 1, max: 1_000 }).map(String);
        parts[field.name] = fc.dictionary(key, singleArbitrary(field, true, opts, depth), { minKeys: 1, maxKeys: opts.maxItems, noNullPrototype: true });
      } else if (field.repeated) {
        parts[field.name] = fc.array(singleArbitrary(field, false, opts, depth), { minLength: 1, maxLength: opts.maxItems });
      } else {
        parts[field.name] = singleArbitrary(field, nonZero, opts, depth);
      }
    }
    return fc.record(parts) as fc.Arbitrary<Plain>;
  });
}

// ---- protojson text, written from the protojson spec ----

function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

/** The JSON name protojson gives a field: its json_name option, else lowerCamelCase. */
export function specJsonName(field: protobuf.Field): string {
  const explicit = (field.options as Record<string, unknown> | undefined)?.['json_name'];
  return typeof explicit === 'string' ? explicit : camel(field.name);
}

/** Deterministic per-field choices from one seed, so fast-check can shrink and replay. */
function pick(seed: number, path: string): boolean {
  let h = seed | 0;
  for (let i = 0; i < path.length; i++) h = Math.imul(h ^ path.charCodeAt(i), 0x9e3779b1);
  return ((h >>> 15) & 1) === 1;
}

/**
 * The protojson text value of `message`: each field under its proto name or its JSON name
 * and each 64-bit integer as a string or (when exact) a number, chosen per field by `seed`.
 */
export function toProtoJson(type: protobuf.Type, message: Plain, seed: number, path = ''): unknown {
  if (type.fullName === STRUCT) return structJson(message);
  if (type.fullName === VALUE) return valueJson(message);
  if (type.fullName === LIST_VALUE) return ((message['values'] as Plain[] | undefined) ?? []).map(valueJson);
  const out: Plain = {};
  for (const field of type.fieldsArray) {
    const value = message[field.name];
    if (value === undefined) continue;
    const fieldPath = `${path}.${field.name}`;
    const key = pick(seed, fieldPath) ? specJsonName(field) : field.name;
    const one = (v: unknown, p: string): unknown => singleJson(field, v, seed, p);
    if (field instanceof protobuf.MapField) {
      const map: Plain = {};
      for (const [k, v] of Object.entries(value as Plain)) Object.defineProperty(map, k, { value: one(v, `${fieldPath}.${k}`), enumerable: true });
      out[key] = map;
    } else if (field.repeated) {
      out[key] = (value as unknown[]).map((v, i) => one(v, `${fieldPath}[${i}]`));
    } else {
      out[key] = one(value, fieldPath);
    }
  }
  return out;
}

function singleJson(field: protobuf.Field, value: unknown, seed: number, path: string): unknown {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) return toProtoJson(resolved, value as Plain, seed, path);
  if (resolved instanceof protobuf.Enum) return pick(seed, path) ? resolved.values[value as string] : value;
  if (Buffer.isBuffer(value)) return value.toString('base64');
  if (['int64', 'sint64', 'sfixed64', 'uint64', 'fixed64'].includes(field.type)) {
    const n = Number(value);
    return Number.isSafeInteger(n) && pick(seed, path) ? n : value;
  }
  return value;
}

function structJson(struct: Plain): Plain {
  const out: Plain = {};
  for (const [k, v] of Object.entries((struct['fields'] as Plain | undefined) ?? {})) {
    Object.defineProperty(out, k, { value: valueJson(v), enumerable: true });
  }
  return out;
}

function valueJson(value: unknown): unknown {
  const v = value as Plain;
  if ('structValue' in v) return structJson(v['structValue'] as Plain);
  if ('listValue' in v) return (((v['listValue'] as Plain)['values'] as unknown[] | undefined) ?? []).map(valueJson);
  if ('nullValue' in v) return null;
  return v['numberValue'] ?? v['stringValue'] ?? v['boolValue'];
}

// ---- proto-loader decoded objects, reduced to the generated form ----

/**
 * Drops what proto-loader adds on decode — the name of the set oneof member (`action`,
 * `kind`, `_body` for a proto3 optional) — keeping the fields of `type` only.
 */
export function plainOf(type: protobuf.Type, decoded: unknown): Plain {
  const obj = decoded as Plain;
  const out: Plain = {};
  for (const field of type.fieldsArray) {
    const value = obj[field.name];
    if (value === undefined || value === null) continue;
    const resolved = field.resolvedType;
    const one = (v: unknown): unknown => (resolved instanceof protobuf.Type ? plainOf(resolved, v) : v);
    if (field instanceof protobuf.MapField) {
      const map: Plain = {};
      for (const [k, v] of Object.entries(value as Plain)) Object.defineProperty(map, k, { value: one(v), enumerable: true, writable: true, configurable: true });
      out[field.name] = map;
    } else if (field.repeated) out[field.name] = (value as unknown[]).map(one);
    else out[field.name] = one(value);
  }
  return out;
}
