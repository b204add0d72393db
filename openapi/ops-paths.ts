/**
 * The ops listener's routes (src/http/ops-app.ts, docs/spec.md §1), in the same document as
 * the main listener's, each path carrying the ops listener as its `servers`: one document
 * describes every port a platform team wires (probes, scraping, this document), and a
 * path-level server says which listener serves which path, where a second top-level
 * `servers` entry would claim every path is on both. /debug/* (benchmarks' and
 * investigations' tools, mounted only on request) is not public.
 */
import { errorResponses } from './error-responses';
import type { JsonSchema } from './protojson-schema';
import { PARAMETERS } from './main-paths';
import { schemaRef } from './schemas';

export const OPENAPI_PATH = '/-/openapi.json';

export const opsServers = [{ url: 'http://{opsListen}', description: 'The ops listener (LONGRUN_OPS_LISTEN)', variables: { opsListen: { default: '127.0.0.1:9181' } } }];

const requestId = { $ref: `${PARAMETERS}X-Request-Id` };
const requestIdHeader = { 'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' } };

function get(operationId: string, summary: string, responses: Record<string, JsonSchema>, description?: string): JsonSchema {
  return {
    servers: opsServers,
    get: {
      operationId,
      tags: ['Operations'],
      summary,
      ...(description ? { description } : {}),
      security: [],
      parameters: [requestId],
      responses: { ...responses, ...errorResponses(['NOT_FOUND']) },
    },
  };
}

const json = (description: string, schema: string): JsonSchema => ({ description, headers: requestIdHeader, content: { 'application/json': { schema: schemaRef(schema) } } });

export function opsPaths(): Record<string, JsonSchema> {
  return {
    '/metrics': get(
      'metrics',
      'Prometheus metrics',
      {
        '200': {
          description: 'The text exposition format; every metric is listed in docs/operating.md.',
          headers: requestIdHeader,
          content: { 'text/plain': { schema: { type: 'string' } } },
        },
      },
      'A failed collection is 500 with a plain-text line.',
    ),
    '/-/liveness': get('liveness', 'Liveness probe', { '200': json('Up; it stays 200 during a drain.', 'Probe') }),
    '/-/readiness': get('readiness', 'Readiness probe', {
      '200': json('Ready for new work.', 'Readiness'),
      '503': json('Draining: take it out of the load balancer.', 'Readiness'),
    }),
    '/runs': get('runs', "This process's runs in flight", { '200': json("Each run, with its workflow's followers.", 'Runs') }),
    [OPENAPI_PATH]: get('openapi', 'This OpenAPI description', {
      '200': json('docs/openapi.json, as the build generated it from the schemas the code reads with.', 'OpenApiDocument'),
    }),
  };
}
