/**
 * What the client's calls resolve with: the outcomes of an execute that are not failures
 * of the turn (docs/spec.md §3) and of the internal routes (§5), as typed results. Failures are
 * LongrunErrors (errors.ts).
 */
import type { AcceptedOn, InFlightKind } from './vocabulary';
import type { BlockingStream } from './ndjson';

/** Where and how an answer was had: which gateway answered, under which request id, after how many attempts. */
export interface Answered {
  workflowId: string;
  /** The X-Request-Id the gateway answered with (the one sent, when it was valid). */
  requestId: string;
  /** The gateway base URL that answered. */
  endpoint: string;
  /** Attempts made, 1 when the first one answered. */
  attempts: number;
}

/** 202: the turn runs on, detached; its end comes as a segment-end callback. */
export interface Accepted extends Answered {
  kind: 'accepted';
  runId: string;
  acceptedOn: AcceptedOn;
}

/** 200 JSON: the turn ended cleanly before it was accepted; no callback follows. */
export interface Finished extends Answered {
  kind: 'finished';
  runId: string;
}

/**
 * 409 WORKFLOW_LOCKED: another run holds the workflow. That run is the turn — its end will
 * be called back — so this is not a failure and is never retried.
 */
export interface Locked extends Answered {
  kind: 'locked';
  retryAfterS: number | undefined;
}

/** 409 STOPPED: the owner's stop arrived before acceptance; the turn is over, no callback follows. */
export interface Stopped extends Answered {
  kind: 'stopped';
}

/** Blocking mode (the owner did not say Detached): checkpoints stream as they come. */
export interface Streaming extends Answered {
  kind: 'streaming';
  stream: BlockingStream;
}

export type ExecuteResult = Accepted | Finished | Locked | Stopped | Streaming;

/**
 * An action the workflow service sent and got no answer to before the segment ended
 * (docs/spec.md §6 `in_flight`, in the segment-end callback and the run record): a write
 * among them may or may not have taken effect.
 */
export interface InFlightEntry {
  kind: InFlightKind;
  /** The Action's requestID, as the workflow service numbered it. */
  request_id: string;
  /** The HTTP method (upper case) of a relayed request; the tool name of an MCP call. */
  method: string;
}

/**
 * GET /internal/workflows/:id/run: the record of the run in flight, as the gateway answers
 * it (its src/http/internal-routes.ts, from the record it keeps in Redis).
 */
export interface RunRecord {
  workflow_id: string;
  run_id: string;
  replica: string;
  /** `detached`, `http` (blocking) or `websocket`. */
  transport: string;
  /** `starting`, `running`, `stopping` or `ended`. */
  state: string;
  /** ISO 8601. */
  started_at: string;
  /** ISO 8601; empty before the first action. */
  last_action_at: string;
  /** Relayed actions unanswered as of the last lease renewal (absent from older gateways). */
  in_flight?: InFlightEntry[];
}

export type StopResult =
  /** 202: the run in flight (on whichever replica) will stop within seconds. */
  | { kind: 'stop_requested'; workflowId: string; reason: string; requestId: string }
  /** 409 NOT_CANCELLABLE: no run of the workflow is in flight; nothing was set. */
  | { kind: 'not_cancellable'; workflowId: string; requestId: string };
