/**
 * A stop that crosses the service's own end (issue [19]): the gateway starts a stop (run
 * limit, drain, lost lease, the owner's stop) just as the service ends the call OK by
 * itself. Driven on a fake clock through a real WorkflowStream and decideEnd, with a
 * modelled service on the other side of a wire with a delay each way:
 *
 * - the orderings one by one (the end read before the stop is written, the write failing,
 *   the stop written and then an OK end with and without a checkpoint that ends the turn);
 * - a property over the offset between the service's end and the stop (−20 … +20 ms in
 *   0.25 ms steps): never a stop's reason for a call the service finished before it read
 *   the stop (unless flagged, when no checkpoint could tell), never `finished` for a call
 *   the service ended because of the stop.
 *
 * The modelled service answers as the real one does (ai-gateway `server.py`): UNAVAILABLE
 * for a WORKHORSE_SERVER_SHUTDOWN it acted on, OK for every other stop word, allowlisted
 * or not, and OK for a turn that ran to its end.
 */
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { isResumable } from '@longrun/client';
import { decideEnd, endsTurn, type EndDecision } from '../../src/run/end-decision';
import { ackFor } from '../../src/run/stop-reasons';
import { segmentEndReason, type EndReason } from '../../src/core/vocabulary';
import { WorkflowStream } from '../../src/workflow/workflow-stream';
import { FakeCall } from '../helpers/fake-call';

/** A stream whose decision is taken as a Run's teardown takes it, on the stream's end. */
function open(): { call: FakeCall; stream: WorkflowStream; decide: (reason: EndReason, word: string) => Promise<EndDecision> } {
  const call = new FakeCall();
  let lastCheckpointStatus: string | undefined;
  const stream = new WorkflowStream(call, (action) => {
    if (action.newCheckpoint) lastCheckpointStatus = action.newCheckpoint.status;
  });
  const decide = async (reason: EndReason, word: string): Promise<EndDecision> => {
    const end = await stream.ended;
    return decideEnd({ ending: { by: 'stop', reason, ack: ackFor(word) }, code: end.code, stopReachedService: stream.stopReachedService, lastCheckpointStatus });
  };
  return { call, stream, decide };
}

const SHUTDOWN = 'WORKHORSE_SERVER_SHUTDOWN';
/** Stops a run and the call with `word`, as Run.handshake does. */
const stop = (stream: WorkflowStream, word: string): Promise<string> => stream.stop(word, ackFor(word), 5_000);

const checkpoint = (status: string) => ({ requestID: '1', action: 'newCheckpoint' as const, newCheckpoint: { status, checkpoint: '' } });

describe('a stop crossing the service end, ordering by ordering', () => {
  it('the end read before the stop: nothing is written, the run finished, no stop outcome', async () => {
    const { call, stream, decide } = open();
    call.finish(grpc.status.OK, '', false); // the status is in; the last message not read yet
    expect(await stop(stream, 'WORKHORSE_RUN_LIMIT')).toBe('already_ended');
    expect(call.written).toEqual([]);
    call.emit('end');
    expect(await decide('run_limit', 'WORKHORSE_RUN_LIMIT')).toEqual({ reason: 'finished', byStop: false, endedWhileStopping: false });
  });

  it('the stop still queued when the OK end arrives (never on the wire): finished', async () => {
    const { call, stream, decide } = open();
    const stopping = stop(stream, 'USER_STOP');
    expect(call.written).toEqual([{ stopWorkflow: { reason: 'USER_STOP' } }]);
    call.finish(grpc.status.OK);
    call.pendingWrites.shift()?.(); // the HTTP/2 stream takes the write only after the end
    await stopping;
    expect(stream.stopReachedService).toBe(false);
    expect((await decide('stop_requested', 'USER_STOP')).reason).toBe('finished');
  });

  it('the stop written, then an OK end after a checkpoint that ends the turn: finished', async () => {
    const { call, stream, decide } = open();
    call.action(checkpoint('FINISHED'));
    const stopping = stop(stream, 'WORKHORSE_LOCK_LOST');
    call.pendingWrites.shift()?.();
    await new Promise((r) => setImmediate(r));
    call.finish(grpc.status.OK);
    expect(await stopping).toBe('ack');
    expect(stream.stopReachedService).toBe(true);
    expect(await decide('lock_lost', 'WORKHORSE_LOCK_LOST')).toEqual({ reason: 'finished', byStop: false, endedWhileStopping: false });
  });

  it('WORKHORSE_SERVER_SHUTDOWN on the wire, then an OK end: finished whatever the checkpoint said (the service answers that stop UNAVAILABLE, an OK only a turn run to its end)', async () => {
    for (const reason of ['run_limit', 'drain', 'lock_lost'] as const) {
      const { call, stream, decide } = open();
      call.action(checkpoint('RUNNING'));
      const stopping = stop(stream, SHUTDOWN);
      call.pendingWrites.shift()?.();
      await new Promise((r) => setImmediate(r));
      call.finish(grpc.status.OK);
      expect(await stopping, reason).toBe('error');
      expect(stream.stopReachedService).toBe(true);
      expect(await decide(reason, SHUTDOWN), reason).toEqual({ reason: 'finished', byStop: false, endedWhileStopping: false });
    }
  });

  it('another word on the wire, then an OK end after a running checkpoint: the stop decides (its ack), flagged for an infrastructure stop only', async () => {
    for (const [reason, word, flagged] of [
      ['run_limit', 'WORKHORSE_RUN_LIMIT', true],
      ['lock_lost', 'WORKHORSE_LOCK_LOST', true],
      ['ping_failed', 'WORKHORSE_WEBSOCKET_PING_FAILED', true],
      ['pong_timeout', 'WORKHORSE_WEBSOCKET_PONG_TIMEOUT', true],
      ['stop_requested', 'USER_STOP', false],
      ['client_closed', 'WORKHORSE_WEBSOCKET_CLOSE_1000', false],
    ] as const) {
      const { call, stream, decide } = open();
      call.action(checkpoint('RUNNING'));
      const stopping = stop(stream, word);
      call.pendingWrites.shift()?.();
      await new Promise((r) => setImmediate(r));
      call.finish(grpc.status.OK);
      expect(await stopping, reason).toBe('ack');
      expect(await decide(reason, word), reason).toEqual({ reason, byStop: true, endedWhileStopping: flagged });
    }
  });

  it('WORKHORSE_SERVER_SHUTDOWN acknowledged with UNAVAILABLE is the stop, whatever the checkpoint said', async () => {
    for (const reason of ['run_limit', 'drain', 'lock_lost'] as const) {
      const { call, stream, decide } = open();
      call.action(checkpoint('FINISHED'));
      const stopping = stop(stream, SHUTDOWN);
      call.pendingWrites.shift()?.();
      await new Promise((r) => setImmediate(r));
      call.finish(grpc.status.UNAVAILABLE);
      expect(await stopping).toBe('ack');
      expect(await decide(reason, SHUTDOWN)).toEqual({ reason, byStop: true, endedWhileStopping: false });
    }
  });

  it('any other status after a stop is the stop, counted as an error: UNAVAILABLE after a word the service answers OK, INTERNAL after any', async () => {
    for (const [reason, word, code] of [
      ['stop_requested', 'USER_STOP', grpc.status.UNAVAILABLE],
      ['run_limit', 'WORKHORSE_RUN_LIMIT', grpc.status.INTERNAL],
      ['drain', SHUTDOWN, grpc.status.INTERNAL],
    ] as const) {
      const { call, stream, decide } = open();
      const stopping = stop(stream, word);
      call.pendingWrites.shift()?.();
      await new Promise((r) => setImmediate(r));
      call.finish(code);
      expect(await stopping).toBe('error');
      expect(await decide(reason, word)).toEqual({ reason, byStop: true, endedWhileStopping: false });
    }
  });

  it('a cancel keeps its reason; no stop keeps the status', () => {
    expect(decideEnd({ ending: { by: 'cancel', reason: 'client_gone' }, code: grpc.status.OK, stopReachedService: false, lastCheckpointStatus: 'FINISHED' }).reason).toBe(
      'client_gone',
    );
    expect(decideEnd({ ending: undefined, code: grpc.status.OK, stopReachedService: false, lastCheckpointStatus: undefined }).reason).toBe('finished');
    expect(decideEnd({ ending: undefined, code: grpc.status.INTERNAL, stopReachedService: false, lastCheckpointStatus: undefined }).reason).toBe('stream_error');
  });

  it('the statuses that end a turn, in any case; STOPPED and RUNNING do not', () => {
    for (const status of ['FINISHED', 'finished', 'FAILED', 'INPUT_REQUIRED', 'TOOL_CALL_APPROVAL_REQUIRED', 'PLAN_APPROVAL_REQUIRED']) expect(endsTurn(status), status).toBe(true);
    for (const status of ['RUNNING', 'STOPPED', 'CANCELLED', 'PAUSED', '', undefined]) expect(endsTurn(status), String(status)).toBe(false);
  });
});

describe('a stop crossing the service end: the property over the offset', () => {
  beforeEach(() => void vi.useFakeTimers({ now: 0 }));
  afterEach(() => void vi.useRealTimers());

  /**
   * The infrastructure stops with the words they go out with (the shutdown word on the
   * public service, their own on one that allowlists them), and the owner's stop.
   */
  const stops = [
    ['run_limit', SHUTDOWN],
    ['run_limit', 'WORKHORSE_RUN_LIMIT'],
    ['drain', SHUTDOWN],
    ['lock_lost', SHUTDOWN],
    ['lock_lost', 'WORKHORSE_LOCK_LOST'],
    ['stop_requested', 'USER_STOP'],
  ] as const;
  // One millisecond of the fake clock stands for a quarter of one on the wire: the clock
  // has whole milliseconds only, and the offsets are taken in 0.25 ms steps.
  const STOP_AT = 400;

  it('never the stop for a turn that finished before the service read the stop; never finished for a call the stop ended', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: -80, max: 80 }), // service end − stop: −20 … +20 ms
        fc.integer({ min: 2, max: 16 }), // one-way wire delay: 0.5 … 4 ms
        fc.integer({ min: 0, max: 8 }), // until the HTTP/2 stream takes the stop: 0 … 2 ms
        fc.constantFrom(...stops),
        fc.boolean(), // its own end follows a checkpoint that ends the turn (the real service's does)
        async (offset, wire, takeMs, [stopReason, word], finalCheckpoint) => {
          const { call, stream, decide } = open();
          const ownEndAt = STOP_AT + offset;
          const stopArrives = STOP_AT + takeMs + wire;
          // The service: it ends by itself at ownEndAt unless the stop reached it before.
          const byItself = ownEndAt <= stopArrives;
          setTimeout(() => call.action(checkpoint('RUNNING')), 40);
          if (byItself) {
            setTimeout(() => {
              if (finalCheckpoint) call.action(checkpoint('FINISHED'));
              call.finish(grpc.status.OK);
            }, ownEndAt + wire);
          } else {
            setTimeout(() => call.finish(ackFor(word)), stopArrives + wire);
          }
          let ended = false;
          void stream.ended.then(() => (ended = true));
          // The gateway: its stop fires at STOP_AT unless the run has ended (a Run's teardown came first).
          setTimeout(() => {
            if (ended) return;
            void stop(stream, word);
            const take = (): void => call.pendingWrites.shift()?.(call.writableEnded ? new Error('stream closed') : null);
            if (takeMs === 0) take();
            else setTimeout(take, takeMs);
          }, STOP_AT);
          await vi.advanceTimersByTimeAsync(1_000);
          const decision = ended && !stream.stopReachedService && call.written.length === 0 ? await decideNoStop(stream) : await decide(stopReason, word);
          if (byItself) {
            // The owner is never told to resume a finished turn without being told to check first.
            if (finalCheckpoint || word === SHUTDOWN) expect(decision.reason).toBe('finished');
            else expect(decision.reason === 'finished' || !isResumable(segmentEndReason(decision.reason)) || decision.endedWhileStopping).toBe(true);
          } else {
            expect(decision.reason).toBe(stopReason);
          }
          expect(call.cancels).toBe(0);
        },
      ),
      { numRuns: 400 },
    );
  });
});

/** A run whose end came before its stop fired: teardown decides with no stop under way. */
async function decideNoStop(stream: WorkflowStream): Promise<EndDecision> {
  const end = await stream.ended;
  return decideEnd({ ending: undefined, code: end.code, stopReachedService: false, lastCheckpointStatus: undefined });
}
