/**
 * ws_resume's count of actions lost and duplicated (both must be 0, docs/spec.md §12):
 * what the workflow service sent and was answered, call by call (sim-protocol.ts
 * CallAnswers), against every requestID the client was delivered on each of its sockets
 * and every answer it sent (resume-client.ts SessionRecord).
 *
 * - lost: an action the service sent that reached none of the client's sockets
 *   (`lostActions`), or an answer the client sent that never reached the service
 *   (`lostAnswers`);
 * - duplicated: an action delivered twice on one socket, or answered twice at the service
 *   (a second answer the service took, or one it refused as naming no pending action —
 *   the client answers whatever it is delivered, so an action replayed after its answer
 *   had reached the service shows here);
 * - reordered: an action delivered on a socket after one the service sent later;
 * - unanswered: an action the service sent and never got an answer for;
 * - unknown: a requestID delivered that the service never sent;
 * - extra starts: a call beyond one per session (a resume start must never reach the
 *   service): its actions are counted against the session's first call only.
 *
 * A re-attach's replay of the action left unanswered at the loss is, on its new socket,
 * that socket's first delivery of it: expected, not a duplicate.
 */
import type { SessionRecord } from '../clients/resume-client';
import type { CallAnswers } from '../../stack/sim-protocol';

export interface Ledger {
  sessions: number;
  actionsSent: number;
  /** lostActions + lostAnswers. */
  lost: number;
  lostActions: number;
  lostAnswers: number;
  duplicated: number;
  reordered: number;
  unanswered: number;
  unknown: number;
  extraStarts: number;
  /** Calls that ended other than OK, or with a stop or a protocol error. */
  callsNotClean: number;
  /** A few of what went wrong, for the log. */
  examples: string[];
}

const NO_PENDING = 'names no pending action';

export function countActions(records: readonly SessionRecord[], calls: readonly CallAnswers[]): Ledger {
  const byWorkflow = new Map<string, CallAnswers[]>();
  for (const call of calls) byWorkflow.set(call.workflowId, [...(byWorkflow.get(call.workflowId) ?? []), call]);
  const ledger: Ledger = {
    sessions: records.length,
    actionsSent: 0,
    lost: 0,
    lostActions: 0,
    lostAnswers: 0,
    duplicated: 0,
    reordered: 0,
    unanswered: 0,
    unknown: 0,
    extraStarts: 0,
    callsNotClean: 0,
    examples: [],
  };
  const note = (what: string): void => {
    if (ledger.examples.length < 10) ledger.examples.push(what);
  };
  for (const record of records) {
    const own = byWorkflow.get(record.workflowId) ?? [];
    ledger.extraStarts += Math.max(0, own.length - 1);
    if (own.length !== 1) note(`${record.workflowId}: ${own.length} calls at the service`);
    const call = own[0];
    const sent = call?.actionsSent ?? 0;
    ledger.actionsSent += sent;
    for (const c of own) {
      if (c.endHow !== 'ok' || c.stopReasons.length > 0 || c.protocolErrors.length > 0) {
        ledger.callsNotClean += 1;
        note(`${record.workflowId}: call ended ${c.endHow} ${c.endCode ?? ''}, stops ${JSON.stringify(c.stopReasons)}, errors ${JSON.stringify(c.protocolErrors)}`);
      }
    }

    const delivered = new Set<string>();
    const perSocket = new Map<string, number>();
    const lastOnSocket = new Map<number, number>();
    for (const { socket, requestID } of record.deliveries) {
      delivered.add(requestID);
      const key = `${socket}/${requestID}`;
      const times = (perSocket.get(key) ?? 0) + 1;
      perSocket.set(key, times);
      if (times > 1) {
        ledger.duplicated += 1;
        note(`${record.workflowId}: #${requestID} delivered ${times} times on socket ${socket}`);
      }
      const n = Number(requestID);
      if (!Number.isInteger(n) || n < 1 || n > sent) {
        ledger.unknown += 1;
        note(`${record.workflowId}: #${requestID} delivered, never sent`);
      }
      if (n < (lastOnSocket.get(socket) ?? 0)) {
        ledger.reordered += 1;
        note(`${record.workflowId}: #${requestID} after #${lastOnSocket.get(socket) ?? 0} on socket ${socket}`);
      }
      lastOnSocket.set(socket, Math.max(n, lastOnSocket.get(socket) ?? 0));
    }

    const answered = new Map<string, number>();
    for (const id of call?.answered ?? []) answered.set(id, (answered.get(id) ?? 0) + 1);
    for (const [id, times] of answered) {
      if (times > 1) {
        ledger.duplicated += times - 1;
        note(`${record.workflowId}: #${id} answered ${times} times at the service`);
      }
    }
    for (const error of call?.protocolErrors ?? []) if (error.includes(NO_PENDING)) ledger.duplicated += 1;
    for (let i = 1; i <= sent; i++) {
      const id = String(i);
      if (!delivered.has(id)) {
        ledger.lostActions += 1;
        note(`${record.workflowId}: #${id} sent, never delivered`);
      }
      if (!answered.has(id)) ledger.unanswered += 1;
    }
    for (const id of record.answersSent.keys()) {
      if (!answered.has(id) && !(call?.protocolErrors ?? []).some((e) => e.includes(`#${id} `))) {
        ledger.lostAnswers += 1;
        note(`${record.workflowId}: answer to #${id} sent, never received`);
      }
    }
  }
  ledger.lost = ledger.lostActions + ledger.lostAnswers;
  return ledger;
}
