/**
 * The document's `components.schemas`: every JSON body a caller sends or reads, each from the
 * one schema the code reads it with —
 *
 * - zod (z.toJSONSchema, JSON Schema 2020-12, OpenAPI 3.1's dialect): the stop body the gateway
 *   validates (src/http/stop-request.ts); the answers, the follow events' data and the
 *   segment-end callback, which @longrun/client validates (packages/client/src); the error
 *   body, the client's with its code narrowed to the gateway's catalog (src/core/errors.ts);
 *   the ops listener's bodies (ops-schemas.ts, held to the types ops-app.ts writes);
 * - the protobuf descriptor for protojson (protojson-schema.ts): the execute body, a
 *   WebSocket client's frames, the Actions the gateway writes.
 *
 * The zod schemas are converted as `input`: the wire form a reader accepts (a field with a
 * default is optional; objects are open, since unknown fields are dropped or kept, never refused).
 */
import {
  acceptedSchema,
  errorBodySchema,
  finishedSchema,
  followEventDataSchemas,
  inFlightSchema,
  runRecordSchema,
  segmentEndSchema,
  stopRequestedSchema,
  storeFences,
} from '@longrun/client';
import { z } from 'zod';
import { errorCatalog, type ErrorCode } from '../src/core/errors';
import { stopRequestSchema } from '../src/http/stop-request';
import { messageTypes } from '../src/workflow/contract';
import { followEventKinds } from '../src/follow/words';
import { openApiDocumentSchema, probeSchema, readinessSchema, runsSchema } from './ops-schemas';
import { ProtoJsonSchemas, type JsonSchema } from './protojson-schema';

export const SCHEMAS = '#/components/schemas/';

/** A `$ref` to a named schema. */
export function schemaRef(name: string): JsonSchema {
  return { $ref: `${SCHEMAS}${name}` };
}

const errorCodes = Object.keys(errorCatalog) as [ErrorCode, ...ErrorCode[]];

/** The gateway's error body: the client's schema, its code one of the catalog's and its fence one of the store fences. */
const gatewayErrorBodySchema = errorBodySchema.extend({
  error: errorBodySchema.shape.error.extend({
    code: z.enum(errorCodes).describe('Stable; docs/errors.md says when each is answered.'),
    message: z.string().describe('For humans; may change.'),
    retryable: z.boolean(),
    fence: z.enum(storeFences).optional().describe('LOCK_UNAVAILABLE from the store fence: why it is up (docs/spec.md §5).'),
  }),
});

/** Name of each follow event's data schema. */
export function followDataName(kind: (typeof followEventKinds)[number]): string {
  return `Follow${kind[0]?.toUpperCase()}${kind.slice(1)}Data`;
}

/** The zod-made schemas, by name. */
function zodSchemas(): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  const named: Array<[z.ZodType, string]> = [
    [inFlightSchema, 'InFlight'],
    [acceptedSchema, 'Accepted'],
    [finishedSchema, 'Finished'],
    [gatewayErrorBodySchema, 'ErrorBody'],
    [stopRequestSchema, 'StopRequest'],
    [stopRequestedSchema, 'StopRequested'],
    [runRecordSchema, 'RunRecord'],
    [segmentEndSchema, 'SegmentEnd'],
    [probeSchema, 'Probe'],
    [readinessSchema, 'Readiness'],
    [runsSchema, 'Runs'],
    [openApiDocumentSchema, 'OpenApiDocument'],
    // The checkpoint's own fields are the Action's (protojson, below); the follow adds `resync`.
    [z.object({ resync: followEventDataSchemas.checkpoint.shape.resync }), 'FollowResync'],
  ];
  for (const kind of followEventKinds) if (kind !== 'checkpoint') named.push([followEventDataSchemas[kind], followDataName(kind)]);
  for (const [schema, id] of named) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, { target: 'draft-2020-12', io: 'input', unrepresentable: 'throw', uri: (id) => `${SCHEMAS}${id}` });
  // Each comes as a document of its own ($schema, $id): inside components it is the document's dialect and place.
  return Object.fromEntries(Object.entries(schemas).map(([name, { $schema: _dialect, $id: _id, ...schema }]) => [name, schema as JsonSchema]));
}

/** Every schema of the document, by name (sorted). */
export function componentSchemas(): Record<string, JsonSchema> {
  const protojson = new ProtoJsonSchemas(SCHEMAS);
  protojson.ref(messageTypes.StartWorkflowRequest, 'decode');
  protojson.ref(messageTypes.ClientEvent, 'decode');
  protojson.ref(messageTypes.Action, 'encode');
  const all: Record<string, JsonSchema> = {
    ...protojson.all(),
    // A blocking execute's ndjson line, and a follow's checkpoint: an Action that is a newCheckpoint (docs/spec.md §3a).
    CheckpointLine: {
      allOf: [schemaRef('Action'), { required: ['newCheckpoint'] }],
      description: 'A newCheckpoint Action as its ndjson line: proto names, unpopulated fields emitted (docs/spec.md §3a).',
    },
    [followDataName('checkpoint')]: { allOf: [schemaRef('CheckpointLine'), schemaRef('FollowResync')], description: followEventDataSchemas.checkpoint.description },
  };
  for (const [name, schema] of Object.entries(zodSchemas())) {
    if (name in all) throw new Error(`two schemas named ${name}`);
    all[name] = schema;
  }
  return Object.fromEntries(Object.entries(all).sort(([a], [b]) => a.localeCompare(b)));
}
