/**
 * An Action as the JSON of one ndjson line, written the way Workhorse writes it (docs/spec.md §3a).
 *
 * Workhorse marshals every Action it forwards with one protojson.MarshalOptions
 * {UseProtoNames: true, EmitUnpopulated: true} (workhorse/internal/ai_assist/duoworkflow/
 * websocket.go, used by http_transport.go's ndjson writer too). Under those options Go's
 * protojson writes:
 *   - proto field names (`agent_context_usage`, never `agentContextUsage`; json_name is
 *     ignored), fields in declaration order;
 *   - scalars without presence even when zero: "" / 0 / false, 64-bit integers as strings
 *     ("0"), enums by name (the zero value's name when unset);
 *   - repeated fields as [] and maps as {} when empty, map keys sorted;
 *   - an unset singular message field outside any oneof as null;
 *   - but never an unset oneof member, nor an unset proto3 `optional` field (both sit in
 *     a oneof, real or synthetic), so only the Action's chosen kind appears.
 * A newCheckpoint line therefore always carries `"errors":[]` and `"agent_context_usage":{}`.
 * Go's single-line output also adds a random space after some commas (its "detrand", to
 * stop byte comparisons); a client must parse the JSON, which is what this reproduces.
 */
import { messageTypes } from './contract';
import { encodeProtoJson, type EncodeOptions } from './protojson';

/** Workhorse's marshal options, as encodeProtoJson options. */
export const WORKHORSE_MARSHAL_OPTIONS: Readonly<EncodeOptions> = Object.freeze({ useProtoNames: true, emitUnpopulated: true });

/**
 * The JSON value of an Action's ndjson line (JSON.stringify it, then add "\n"); `action`
 * is an Action as proto-loader decodes it. Action holds no google.protobuf.Struct/Value and
 * no recursive type (test/unit/contract.test.ts checks this), so it cannot throw for any Action
 * the service sends.
 */
export function workhorseActionJson(action: object): Record<string, unknown> {
  return encodeProtoJson(messageTypes.Action, action, WORKHORSE_MARSHAL_OPTIONS) as Record<string, unknown>;
}
