/**
 * Parses a JSON request body as Go's protojson reads one (what Workhorse uses): the bytes
 * must be UTF-8, every \u escape a whole code point (no unpaired surrogate), and the
 * nesting at most `maxDepth` levels anywhere in the document, unknown fields included
 * (protojson's MAX_JSON_DEPTH for a StartWorkflowRequest). The nesting is measured on the
 * raw bytes before JSON.parse runs, so a body of a million opening brackets is refused
 * after the first maxDepth + 1 of them, not parsed.
 */
import { isUtf8 } from 'node:buffer';

/** A body that is not acceptable JSON; the message says why, in words fit for a caller. */
export class JsonBodyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JsonBodyError';
  }
}

/** Parses `body` (empty = `{}`); throws JsonBodyError. */
export function parseJsonBody(body: Uint8Array, maxDepth: number): unknown {
  if (body.length === 0) return {};
  if (!isUtf8(body)) throw new JsonBodyError('request body is not valid UTF-8');
  const problem = scanJson(body, maxDepth);
  if (problem === 'too_deep') throw new JsonBodyError(`request body is nested deeper than ${maxDepth} levels`);
  if (problem === 'unpaired_surrogate') throw new JsonBodyError('request body has a \\u escape of an unpaired UTF-16 surrogate');
  try {
    return JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.length).toString('utf8'));
  } catch {
    throw new JsonBodyError('request body is not valid JSON');
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LETTER_U = 0x75;

/**
 * One pass over JSON text: the first nesting level deeper than `maxDepth`, or the first
 * unpaired surrogate escape. Text that is not JSON may be misread here; JSON.parse then
 * refuses it anyway.
 */
function scanJson(bytes: Uint8Array, maxDepth: number): 'too_deep' | 'unpaired_surrogate' | undefined {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === QUOTE) inString = false;
      else if (b === BACKSLASH) {
        if (bytes[i + 1] !== LETTER_U) {
          i += 1; // the escaped character
          continue;
        }
        const unit = hex4(bytes, i + 2);
        if (unit < 0) {
          i += 1;
          continue;
        }
        if (unit >= 0xdc00 && unit <= 0xdfff) return 'unpaired_surrogate';
        if (unit >= 0xd800 && unit <= 0xdbff) {
          const low = bytes[i + 6] === BACKSLASH && bytes[i + 7] === LETTER_U ? hex4(bytes, i + 8) : -1;
          if (low < 0xdc00 || low > 0xdfff) return 'unpaired_surrogate';
          i += 11;
          continue;
        }
        i += 5;
      }
      continue;
    }
    if (b === QUOTE) inString = true;
    else if (b === 0x7b || b === 0x5b) {
      depth += 1;
      if (depth > maxDepth) return 'too_deep';
    } else if (b === 0x7d || b === 0x5d) depth -= 1;
  }
  return undefined;
}

/** The value of four hex digits at `at`, or -1. */
function hex4(bytes: Uint8Array, at: number): number {
  let value = 0;
  for (let k = 0; k < 4; k++) {
    const c = bytes[at + k];
    if (c === undefined) return -1;
    const digit = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : c >= 0x41 && c <= 0x46 ? c - 0x37 : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}
