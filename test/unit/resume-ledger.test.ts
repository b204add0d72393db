/**
 * ws_resume's count of lost and duplicated actions (bench/measure/resume-ledger.ts): what the
 * service sent and was answered against what the client was delivered, socket by socket.
 * A replay of the action left unanswered at the loss, on the new socket, is expected.
 */
import { describe, expect, it } from 'vitest';
import type { SessionRecord } from '../../bench/clients/resume-client';
import { countActions } from '../../bench/measure/resume-ledger';
import type { CallAnswers } from '../../stack/sim-protocol';

/** A session delivered these (socket, requestID) pairs, and answered each id delivered once per delivery unless `answers` says which. */
function session(deliveries: Array<[socket: number, id: number]>, answers?: number[]): SessionRecord {
  const answersSent = new Map<string, number>();
  for (const id of answers ?? deliveries.map(([, id]) => id)) answersSent.set(String(id), (answersSent.get(String(id)) ?? 0) + 1);
  return {
    workflowId: 'w',
    holder: 0,
    reattaches: [],
    rtt: { direct: [], bridged: [] },
    deliveries: deliveries.map(([socket, id]) => ({ socket, requestID: String(id) })),
    answersSent,
    recoveries: [],
    reattachesClosed1012: 0,
    bridgeRefusals: [],
    firstFrameMs: 1,
    turnMs: 1,
    end: '1000',
    errors: [],
  };
}

function call(sent: number, answered: number[], extra: Partial<CallAnswers> = {}): CallAnswers {
  return { workflowId: 'w', goal: 'bench', actionsSent: sent, answered: answered.map(String), protocolErrors: [], stopReasons: [], endHow: 'ok', endCode: null, ...extra };
}

describe('countActions', () => {
  it('a replay of the unanswered action on the new socket is neither lost nor duplicated', () => {
    const ledger = countActions(
      [
        session(
          [
            [0, 1],
            [0, 2],
            [1, 2],
            [1, 3],
          ],
          [1, 2, 3],
        ),
      ],
      [call(3, [1, 2, 3])],
    );
    expect(ledger).toMatchObject({ actionsSent: 3, lost: 0, duplicated: 0, reordered: 0, unanswered: 0, unknown: 0, extraStarts: 0, callsNotClean: 0 });
  });

  it('an action never delivered is lost; one delivered twice on a socket or answered twice is duplicated', () => {
    expect(
      countActions(
        [
          session([
            [0, 1],
            [1, 3],
          ]),
        ],
        [call(3, [1, 3])],
      ),
    ).toMatchObject({ lost: 1, lostActions: 1, unanswered: 1, duplicated: 0 });
    expect(
      countActions(
        [
          session([
            [0, 1],
            [0, 2],
          ]),
        ],
        [call(2, [1])],
      ),
    ).toMatchObject({ lost: 1, lostAnswers: 1, unanswered: 1 });
    expect(
      countActions(
        [
          session([
            [0, 1],
            [0, 1],
            [0, 2],
          ]),
        ],
        [call(2, [1, 2])],
      ),
    ).toMatchObject({ lost: 0, duplicated: 1 });
    expect(
      countActions(
        [
          session([
            [0, 1],
            [1, 1],
          ]),
        ],
        [call(1, [1], { protocolErrors: ['actionResponse #1 names no pending action'] })],
      ),
    ).toMatchObject({ duplicated: 1, callsNotClean: 1 });
  });

  it('out of order on a socket, never sent, and a second start at the service are counted', () => {
    expect(
      countActions(
        [
          session([
            [0, 2],
            [0, 1],
          ]),
        ],
        [call(2, [1, 2])],
      ),
    ).toMatchObject({ reordered: 1 });
    expect(
      countActions(
        [
          session([
            [0, 1],
            [0, 9],
          ]),
        ],
        [call(1, [1])],
      ),
    ).toMatchObject({ unknown: 1 });
    expect(countActions([session([[0, 1]])], [call(1, [1]), call(1, [], { goal: '' })])).toMatchObject({ extraStarts: 1 });
  });
});
