/**
 * Hostile execute bodies for property tests of the body decoder (issue 11 point 3): any
 * JSON, StartWorkflowRequest's own field names with values of every JSON type, nesting
 * around and far past MAX_JSON_DEPTH, numbers no double holds, unicode keys, unpaired
 * surrogate escapes, text that is not JSON and bytes that are not UTF-8.
 */
import fc from 'fast-check';
import { messageTypes } from '../../src/workflow/contract';
import { fieldJsonName, MAX_JSON_DEPTH } from '../../src/workflow/protojson';

const requestFields = messageTypes.StartWorkflowRequest.fieldsArray;
const fieldNames = [...new Set(requestFields.flatMap((f) => [f.name, fieldJsonName(f)]))];

/** JSON nested `depth` levels deep (objects and arrays mixed), as text. */
export function nestedText(depth: number, leaf: string, pattern: number): string {
  let open = '';
  let close = '';
  for (let i = 0; i < depth; i++) {
    const object = ((pattern >> (i % 16)) & 1) === 1;
    open += object ? '{"k":' : '[';
    close = (object ? '}' : ']') + close;
  }
  return open + leaf + close;
}

export const hostileText: fc.Arbitrary<string> = fc.oneof(
  // Any JSON at all, including wrong top-level types.
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  // StartWorkflowRequest's own field names (proto and JSON spellings) with values of any type.
  fc.dictionary(fc.constantFrom(...fieldNames), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 }).map((v) => JSON.stringify(v)),
  // Deep nesting around the limit, in flowConfig, in an unknown field, in a list field.
  fc
    .tuple(
      fc.integer({ min: 1, max: MAX_JSON_DEPTH + 40 }),
      fc.constantFrom('flowConfig', 'unknownField', 'additional_context', 'mcpTools'),
      fc.nat(),
      fc.constantFrom('1', 'null', '"s"', '{}', '[]'),
    )
    .map(([depth, field, pattern, leaf]) => `{"${field}":${nestedText(depth, leaf, pattern)}}`),
  // Numbers no double holds, and integers past every range, where numbers and strings go.
  fc
    .tuple(fc.constantFrom('1e400', '-1e400', '1e308', '123456789012345678901234567890', '-0', '0.5', '1e2'), fc.constantFrom('flowConfig', 'streaming', 'goal', 'approval'))
    .map(([n, field]) =>
      field === 'flowConfig' ? `{"flowConfig":{"n":${n},"l":[${n}]}}` : field === 'approval' ? `{"approval":{"approval":{"approval_source":${n}}}}` : `{"${field}":${n}}`,
    ),
  // Unicode keys and values, lone surrogate escapes, control characters.
  fc
    .tuple(fc.string({ unit: 'binary', maxLength: 6 }), fc.constantFrom('\\ud800', '\\udc00', '\\ud83d\\ude00', '\\u0000', 'é', '\\"'))
    .map(([key, esc]) => `{"flowConfig":{${JSON.stringify(key)}:"x${esc}"},"goal":"${esc}"}`),
  // Text that is not JSON.
  fc.string({ unit: 'binary', maxLength: 20 }),
);

export const hostileBody: fc.Arbitrary<Buffer> = fc.oneof(
  hostileText.map((t) => Buffer.from(t, 'utf8')),
  // Bytes that are not UTF-8 inside an otherwise valid body.
  fc.uint8Array({ minLength: 1, maxLength: 4 }).map((b) => Buffer.concat([Buffer.from('{"goal":"'), Buffer.from(b).map((x) => x | 0x80), Buffer.from('"}')])),
);
