/**
 * @longrun/client — what a dispatcher and an owner service need to drive longrun: the
 * client (execute, stop, getRun) with its typed results and errors and retry policy, the
 * blocking checkpoint stream, the segment-end callback's verification, the WebSocket
 * session client that reconnects and re-attaches to its run (session.ts), and follow(): a
 * workflow's runs followed live, resumed by Last-Event-ID after a drop (follow.ts). The Express
 * middleware for the callback is `@longrun/client/express` (express.ts), so that nothing here
 * needs Express or its types. See docs/owner-integration.md and examples/dispatcher/ in the
 * longrun repository. The zod schemas it reads the gateway's answers with are exported too
 * (`…Schema`): the gateway's OpenAPI description (docs/openapi.json) is generated from them.
 */
export { LongrunClient, type LongrunClientOptions, type StartWorkflowInput, type CallOptions, type ExecuteOptions } from './client';
export { LongrunError, clientErrorCodes, type ClientErrorCode, type GatewayErrorCode, type LongrunErrorCode } from './errors';
export type { Accepted, Answered, ExecuteResult, Finished, InFlightEntry, Locked, RunRecord, Stopped, StopResult, Streaming } from './outcomes';
export { BlockingStream, type BlockingEnd, type Checkpoint } from './ndjson';
export { defaultRetryOptions, retryDelayMs, systemClock, type RetryClock, type RetryOptions } from './retry';
export { acceptedSchema, errorBodySchema, finishedSchema, inFlightSchema, retryAfterOf, runRecordSchema, stopRequestedSchema } from './responses';
export { STORE_FENCE_CLOSE_CODE, fencedStartOf, type FencedStart } from './store-fence';
export { SegmentEndRejected, isFinal, isResumable, segmentEndSchema, verifySegmentEnd, type SegmentEnd, type SegmentEndRequest, type SegmentEndVerifyOptions } from './segment-end';
export { GATEWAY_TOKEN_MAX_AGE_S } from './jwt';
export {
  LongrunSession,
  defaultSessionReconnect,
  reconnectCloseCodes,
  type LongrunSessionOptions,
  type SessionAction,
  type SessionCheckpoint,
  type SessionClose,
  type SessionEvent,
  type SessionReconnectOptions,
  type SessionResponse,
  type SessionStart,
} from './session';
export {
  acceptedOn,
  finalSegmentEndReasons,
  inFlightKinds,
  resumableSegmentEndReasons,
  segmentEndReasons,
  followEventKinds,
  storeFences,
  type AcceptedOn,
  type FinalSegmentEndReason,
  type InFlightKind,
  type ResumableSegmentEndReason,
  type SegmentEndReason,
  type FollowEventKind,
  type StoreFence,
} from './vocabulary';
export type { FollowEvent, FollowOptions } from './follow';
export { followEventDataSchemas } from './follow-events';
export type * from './contract';
export { version } from './version';
