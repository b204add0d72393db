/**
 * Why a run ended, decided once, at teardown, from what was seen on the wire (docs/spec.md §6
 * reasons). A stop longrun starts can cross the service's own end: the turn finished on
 * the service while the stop was being decided or was on its way. Such a turn must be
 * reported `finished`, or the owner dispatches the next segment of a turn that is over.
 *
 * The real service (ai-gateway `server.py`) ends a call OK when the workflow ran to its
 * end; after a stop it ends it UNAVAILABLE for WORKHORSE_SERVER_SHUTDOWN and OK for every
 * other word (stop-reasons.ts `ackFor`). So:
 *
 *   no stop, or a cancel                         → the status's reason (a cancel keeps its own)
 *   a stop, the call ends with another status
 *     than OK                                    → the stop's reason (its ack, or an error)
 *   a stop, the call ends OK, and
 *     the stop's ack is UNAVAILABLE (shutdown)   → finished: OK is only what a turn that ran
 *                                                  to its end gets, never the stop's answer
 *     the end was read before the stop reached the wire → finished
 *     the last checkpoint's status ends a turn   → finished (the turn's own end)
 *     otherwise                                  → the stop's reason; for an infrastructure
 *       stop also `endedWhileStopping`: OK is that word's ack and also what a turn that
 *       finished by itself ends with, and nothing on the wire tells them apart
 *
 * A user stop ended OK without a terminal checkpoint is the stop's end: both readings end
 * the turn, so the owner has nothing to re-dispatch either way. A WebSocket client's close
 * frame (WORKHORSE_WEBSOCKET_CLOSE_<code>) is such a stop too.
 */
import * as grpc from '@grpc/grpc-js';
import type { EndReason } from '../core/vocabulary';
import { endReasonForStatus } from './stop-reasons';

/**
 * Checkpoint statuses after which the service has nothing more to do in this call: the
 * turn is over (finished or failed) or waits for the user. STOPPED and CANCELLED are not
 * here: they are what a stop itself leads to.
 */
const TURN_ENDING_STATUSES: ReadonlySet<string> = new Set(['FINISHED', 'COMPLETED', 'FAILED', 'ERROR', 'INPUT_REQUIRED', 'PLAN_APPROVAL_REQUIRED', 'TOOL_CALL_APPROVAL_REQUIRED']);

export function endsTurn(checkpointStatus: string | undefined): boolean {
  return checkpointStatus !== undefined && TURN_ENDING_STATUSES.has(checkpointStatus.toUpperCase());
}

/**
 * What longrun had started when the call ended: nothing, a stop handshake (with the status
 * that acknowledges its word), or a cancel.
 */
export type Ending = { by: 'stop'; reason: EndReason; ack: grpc.status } | { by: 'cancel'; reason: EndReason } | undefined;

export interface EndFacts {
  ending: Ending;
  /** The call's final status code. */
  code: grpc.status;
  /** The stop was on the wire before the service's end was read (WorkflowStream.stopReachedService). */
  stopReachedService: boolean;
  /** The status of the last newCheckpoint the service sent, if any. */
  lastCheckpointStatus: string | undefined;
}

export interface EndDecision {
  reason: EndReason;
  /** The stop decided the end: its handshake outcome is counted. */
  byStop: boolean;
  /** An infrastructure stop acknowledged OK crossed an OK end, and no checkpoint said the turn was over. */
  endedWhileStopping: boolean;
}

/** Stops the service answers OK by design (user stops): an OK end after one says nothing new. */
const ENDED_OK_BY_DESIGN: ReadonlySet<EndReason> = new Set(['stop_requested', 'client_closed']);

const FINISHED: EndDecision = Object.freeze({ reason: 'finished', byStop: false, endedWhileStopping: false });

export function decideEnd(facts: EndFacts): EndDecision {
  const { ending, code } = facts;
  if (!ending) return { reason: endReasonForStatus(code), byStop: false, endedWhileStopping: false };
  if (ending.by === 'cancel') return { reason: ending.reason, byStop: false, endedWhileStopping: false };
  if (code !== grpc.status.OK) return { reason: ending.reason, byStop: true, endedWhileStopping: false };
  if (ending.ack !== grpc.status.OK || !facts.stopReachedService || endsTurn(facts.lastCheckpointStatus)) return FINISHED;
  return { reason: ending.reason, byStop: true, endedWhileStopping: !ENDED_OK_BY_DESIGN.has(ending.reason) };
}
