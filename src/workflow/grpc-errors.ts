/**
 * How a workflow stream that failed before the response was committed becomes a status
 * for the caller (SPEC §3 status table): translated here, at the boundary.
 */
import * as grpc from '@grpc/grpc-js';
import { GatewayError } from '../errors';
import type { StreamEnd } from '../run/workflow-stream';

function detail(end: StreamEnd): string {
  return end.details.length > 300 ? `${end.details.slice(0, 300)}…` : end.details;
}

export function streamEndToError(end: StreamEnd): GatewayError {
  const codeName = grpc.status[end.code] ?? String(end.code);
  const cause = { grpcCode: end.code, details: end.details };
  switch (end.code) {
    case grpc.status.INVALID_ARGUMENT:
      return new GatewayError('INVALID_REQUEST', `workflow service rejected the request: ${detail(end)}`, { cause });
    case grpc.status.RESOURCE_EXHAUSTED:
      if (end.details.includes('USAGE_QUOTA_EXCEEDED')) {
        return new GatewayError('USAGE_QUOTA_EXCEEDED', 'usage quota exceeded', { cause });
      }
      return new GatewayError('WORKFLOW_SERVICE_UNAVAILABLE', `workflow service is out of resources (${codeName})`, { cause });
    default:
      return new GatewayError('WORKFLOW_SERVICE_UNAVAILABLE', `workflow service ended the stream with ${codeName}`, { cause });
  }
}
