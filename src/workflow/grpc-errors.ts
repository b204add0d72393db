/**
 * How a workflow stream that failed before the response was committed becomes the
 * caller's error code (docs/spec.md §3 status table; the status is http/error-status.ts's).
 */
import * as grpc from '@grpc/grpc-js';
import { GatewayError } from '../core/errors';
import type { StreamEnd } from './workflow-stream';

function detail(end: StreamEnd): string {
  return end.details.length > 300 ? `${end.details.slice(0, 300)}…` : end.details;
}

/** The caller's error for a stream that ended with `end` before anything was committed; `runId` names the run for the log. */
export function streamEndToError(end: StreamEnd, runId?: string): GatewayError {
  const codeName = grpc.status[end.code] ?? String(end.code);
  const cause = { grpcCode: end.code, details: end.details };
  const context = { cause, runId };
  switch (end.code) {
    case grpc.status.INVALID_ARGUMENT:
      return new GatewayError('INVALID_REQUEST', `workflow service rejected the request: ${detail(end)}`, context);
    case grpc.status.RESOURCE_EXHAUSTED:
      if (end.details.includes('USAGE_QUOTA_EXCEEDED')) {
        return new GatewayError('USAGE_QUOTA_EXCEEDED', 'usage quota exceeded', context);
      }
      return new GatewayError('WORKFLOW_SERVICE_UNAVAILABLE', `workflow service is out of resources (${codeName})`, context);
    default:
      return new GatewayError('WORKFLOW_SERVICE_UNAVAILABLE', `workflow service ended the stream with ${codeName}`, context);
  }
}
