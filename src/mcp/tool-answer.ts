/**
 * The two ends of a runMCPTool call (docs/spec.md §4, Workhorse `mcp.go`): the action's `args`
 * JSON becomes the tool's arguments, and the tool's result becomes the
 * `PlainTextResponse` the workflow service waits for.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** What the workflow service receives: PlainTextResponse{response} or {error}. */
export interface PlainTextAnswer {
  response?: string;
  error?: string;
}

/** The answer, and what it counts as in metrics. */
export interface ToolAnswer {
  answer: PlainTextAnswer;
  result: 'ok' | 'tool_error' | 'too_large';
}

/** Workhorse's words for a result without usable text (the service may match them). */
const EMPTY_RESPONSE = 'MCP tool response is empty';
const UNSUPPORTED_CONTENT = 'MCP tool response content type not supported';

/** An answer must fit, with its envelope, in one 4 MiB gRPC message (as a relayed body). */
export const TOOL_ANSWER_LIMIT = 4 * 1024 * 1024 - 4 * 1024;

export type ParsedArguments = { ok: true; value: Record<string, unknown> } | { ok: false; error: string };

/** The action's `args`: a JSON object; absent or empty is no arguments. */
export function parseToolArguments(json: string | undefined): ParsedArguments {
  if (json === undefined || json.trim() === '') return { ok: true, value: {} };
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return { ok: false, error: 'tool arguments are not valid JSON' };
  }
  // `null` is no arguments, as Go's json.Unmarshal into a map leaves it.
  if (value === null) return { ok: true, value: {} };
  if (typeof value !== 'object' || Array.isArray(value)) return { ok: false, error: 'tool arguments are not a JSON object' };
  return { ok: true, value: value as Record<string, unknown> };
}

/**
 * The first content item's text is the answer, in `error` when the tool reports an
 * error and in `response` otherwise; no content, or a first item that is not text,
 * answers Workhorse's fixed words in the same place. A text over the size limit is an
 * error.
 */
export function toolAnswer(result: CallToolResult): ToolAnswer {
  const first = result.content[0];
  const text = first === undefined ? EMPTY_RESPONSE : first.type === 'text' ? first.text : UNSUPPORTED_CONTENT;
  if (Buffer.byteLength(text, 'utf8') > TOOL_ANSWER_LIMIT) {
    return { answer: { error: `MCP tool response exceeded size limit (${TOOL_ANSWER_LIMIT} bytes)` }, result: 'too_large' };
  }
  return result.isError ? { answer: { error: text }, result: 'tool_error' } : { answer: { response: text }, result: 'ok' };
}
