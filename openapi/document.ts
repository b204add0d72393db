/**
 * longrun's OpenAPI 3.1 description (docs/openapi.json): every route a caller touches on both
 * listeners, the segment-end callback as a webhook, every error code with its status and
 * Retry-After. Nothing in it is written apart from the code: the bodies' schemas are the ones
 * the code reads them with (schemas.ts), the errors the catalog's (error-responses.ts), the
 * paths the routes' own constants. `npm run openapi` writes it; the build writes the copy
 * the ops listener serves (`/-/openapi.json`, src/http/openapi-route.ts).
 */
import { version } from '../src/core/version';
import { mainPaths } from './main-paths';
import { opsPaths } from './ops-paths';
import type { JsonSchema } from './protojson-schema';
import { componentSchemas } from './schemas';
import { webhooks } from './webhooks';

export const OPENAPI_VERSION = '3.1.1';

export function openApiDocument(): JsonSchema {
  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: 'longrun',
      version,
      summary: 'Detached-run streaming gateway between dispatcher jobs and a gRPC agent-workflow service',
      description:
        "What callers of longrun touch: the execute (blocking ndjson or detached 202), the follow (Server-Sent Events), the WebSocket session route, the owner's internal routes, the ops listener, and the segment-end callback the owner receives. The behaviour behind each is docs/spec.md's; every error code is in docs/errors.md. Generated from the code (openapi/); do not edit docs/openapi.json by hand: `npm run openapi` writes it.",
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: 'http://{listen}', description: 'The main listener (LONGRUN_LISTEN)', variables: { listen: { default: '127.0.0.1:8181' } } }],
    tags: [
      { name: 'Dispatch', description: 'Starting turns (docs/spec.md §3).' },
      { name: 'Follow', description: 'Following runs live (docs/spec.md §14).' },
      { name: 'Sessions', description: 'Interactive WebSocket sessions (docs/spec.md §11, §12).' },
      { name: 'Owner', description: "The owner service's side: its calls to longrun (JWT, docs/spec.md §5) and the callback it receives (§6)." },
      { name: 'Operations', description: 'The ops listener (LONGRUN_OPS_LISTEN): metrics, probes, runs in flight, this document.' },
    ],
    paths: { ...mainPaths(), ...opsPaths() },
    webhooks: webhooks(),
    components: {
      schemas: componentSchemas(),
      parameters: {
        workflow_id: { name: 'workflow_id', in: 'path', required: true, description: "The workflow's id, as the owner knows it.", schema: { type: 'string' } },
        'X-Request-Id': {
          name: 'X-Request-Id',
          in: 'header',
          description: 'Kept when it matches the pattern, else replaced by a new one; passed on to the owner and the workflow service (docs/spec.md §7).',
          schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
        },
      },
      headers: {
        'X-Request-Id': { description: "The request's id: the caller's when valid, else a new one. On every response.", required: true, schema: { type: 'string' } },
      },
      securitySchemes: {
        callerCredentials: {
          type: 'apiKey',
          in: 'header',
          name: 'Authorization',
          description:
            "Whatever the owner accepts (GitLab: a personal, OAuth or job token): longrun forwards the caller's headers with the preauthorization and lets the owner decide (docs/spec.md §2). `Authorization` stands for them; `PRIVATE-TOKEN` or a cookie work alike.",
        },
        ownerJwt: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            'HS256 with the shared secret, `iss: "gitlab"`, a `workflow_id` claim equal to the path\'s, `iat` and `exp` at most 300 s apart. Anything else is 401 without detail.',
        },
        workhorseJwt: {
          type: 'apiKey',
          in: 'header',
          name: 'Gitlab-Workhorse-Api-Request',
          description: 'A JWT, HS256 with the shared secret, `iss: "gitlab-workhorse"`, signed within LONGRUN_JWT_REFRESH_MS of each attempt (Rails allows an `iat` 90 s old).',
        },
      },
    },
  };
}
