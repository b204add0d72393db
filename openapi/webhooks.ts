/**
 * The calls longrun makes to the owner that an owner implements (docs/spec.md §6,
 * docs/owner-integration.md): the segment-end callback, as an OpenAPI webhook.
 */
import type { JsonSchema } from './protojson-schema';
import { schemaRef } from './schemas';

export function webhooks(): Record<string, JsonSchema> {
  return {
    segmentEnd: {
      post: {
        operationId: 'segmentEnd',
        tags: ['Owner'],
        summary: 'The segment-end callback: a detached run ended',
        description:
          "`POST {LONGRUN_OWNER_URL}/api/v4/internal/ai/duo_workflows/workflows/{workflow_id}/segment_end`, at the end of every accepted detached run. The owner acts on `reason`: dispatch the next segment when it is resumable, record the end otherwise — idempotently, since an attempt answered 429 or 5xx, or not at all, is sent again (up to LONGRUN_CALLBACK_ATTEMPTS, 3 by default), each with a freshly signed JWT. @longrun/client's verifySegmentEnd() checks the token and the body.",
        security: [{ workhorseJwt: [] }],
        parameters: [{ name: 'X-Request-Id', in: 'header', description: 'The execute request that started the run.', schema: { type: 'string' } }],
        requestBody: { required: true, content: { 'application/json': { schema: schemaRef('SegmentEnd') } } },
        responses: {
          '2XX': { description: 'Taken: not sent again.' },
          '429': { description: 'Sent again, after a pause.' },
          '5XX': { description: 'Sent again, after a pause.' },
          default: { description: 'Any other answer is final: not sent again.' },
        },
      },
    },
  };
}
