/**
 * What a driver may ask a simulator process (sim-process.ts, over ipc.ts): what the
 * simulator recorded, or to do a benchmark baseline's work itself; and the environment
 * the process is started with.
 */
import type { PreauthConfig } from '../sandbox/owner-sim';

export type SimRole = 'workflow' | 'owner';

/** How simulators.ts tells a simulator process what to be. */
export interface SimProcessEnv {
  STACK_SIM_ROLE: SimRole;
  /** The shared secret, base64 of 32 bytes. */
  STACK_SIM_SECRET: string;
  /** JSON: the owner's preauth defaults, or the workflow simulator's options (what JSON carries of them). */
  STACK_SIM_OPTIONS: string;
  /** The owner's Service.URI (the owner only). */
  STACK_SIM_WORKFLOW_URI?: string;
  /** The port to listen on (the workflow simulator only; default 0). */
  STACK_SIM_PORT?: string;
}

/** What the workflow simulator recorded of one call, in a compact, cloneable form. */
export interface CallSummary {
  workflowId: string;
  startedAt: number;
  actionsSent: number;
  /** Action responses received, and how many of them were successful httpResponses. */
  responses: number;
  httpOk: number;
  stopReasons: string[];
  stopReceivedAt: number[];
  endedAt: number | null;
  endHow: string | null;
  endCode: string | null;
}

/**
 * What the workflow simulator sent and was answered in one call (ws_resume's count of
 * lost and duplicated actions). Every action the simulator sends takes the next
 * requestID from 1, checkpoints too, so the ids it sent are 1..actionsSent.
 */
export interface CallAnswers {
  workflowId: string;
  /** The start request's goal (a resume start must never reach the service). */
  goal: string;
  actionsSent: number;
  /** The requestID of every answer received, in the order received (repeats kept). */
  answered: string[];
  protocolErrors: string[];
  stopReasons: string[];
  endHow: string | null;
  endCode: string | null;
}

export interface CallCounts {
  calls: number;
  open: number;
  /** Calls that sent at least one action. */
  withAction: number;
  ended: number;
  /** Calls by the first stop reason they received. */
  stopReasons: Record<string, number>;
}

/** The relay baseline: the simulator process doing the owner API calls itself. */
export interface DirectRelayRequest {
  ownerUrl: string;
  path: string;
  /** Concurrent loops, each doing its share of `actions` one after another. */
  concurrency: number;
  actions: number;
  /** The user's API token (what longrun sends as Authorization). */
  token: string;
}

export interface DirectRelayResult {
  actions: number;
  ok: number;
  elapsedMs: number;
}

// A type alias (not an interface) so it satisfies ipc.ts's QueryMap index signature.
export type SimQueries = {
  calls: { args: { prefix: string }; result: CallSummary[] };
  callCounts: { args: { prefix: string }; result: CallCounts };
  answers: { args: { prefix: string }; result: CallAnswers[] };
  directRelay: { args: DirectRelayRequest; result: DirectRelayResult };
  configure: { args: { workflowId: string; config: PreauthConfig }; result: null };
  segmentEnds: { args: { prefix: string }; result: Record<string, number> };
  /** When the first and the last segment-end callback for those workflows arrived (epoch ms; null when none did). */
  segmentEndTimes: { args: { prefix: string }; result: { first: number; last: number } | null };
  /** Forgets what was recorded for ended calls and past requests (memory between phases). */
  reset: { args: Record<string, never>; result: null };
};
