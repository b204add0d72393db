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
 */
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { decideEnd, endsTurn, type EndDecision } from '../../src/run/end-decision';
import { isResumable } from '../../src/client/segment-end';
import { segmentEndReason, type EndReason } from '../../src/vocabulary';
import { WorkflowStream } from '../../src/workflow/workflow-stream';
import { FakeCall } from '../helpers/fake-call';

/** A stream whose decision is taken as a Run's teardown takes it, on the stream's end. */
function open(): { call: FakeCall; stream: WorkflowStream; decide: (reason: EndReason, by?: 'stop' | 'cancel') => Promise<EndDecision> } {
  const call = new FakeCall();
  let lastCheckpointStatus: string | undefined;
  const stream = new WorkflowStream(call, (action) => {
    if (action.newCheckpoint) lastCheckpointStatus = action.newCheckpoint.status;
  });
  const decide = async (reason: EndReason, by: 'stop' | 'cancel' = 'stop'): Promise<EndDecision> => {
    const end = await stream.ended;
    return decideEnd({ ending: { by, reason }, code: end.code, stopReachedService: stream.stopReachedService, lastCheckpointStatus });
  };
  return { call, stream, decide };
}

const checkpoint = (status: string) => ({ requestID: '1', action: 'newCheckpoint' as const, newCheckpoint: { status, checkpoint: '' } });

describe('a stop crossing the service end, ordering by ordering', () => {
  it('the end read before the stop: nothing is written, the run finished, no stop outcome', async () => {
    const { call, stream, decide } = open();
    call.finish(grpc.status.OK, '', false); // the status is in; the last message not read yet
    expect(await stream.stop('WORKHORSE_RUN_LIMIT', 5_000)).toBe('already_ended');
    expect(call.written).toEqual([]);
    call.emit('end');
    expect(await decide('run_limit')).toEqual({ reason: 'finished', byStop: false, endedWhileStopping: false });
  });

  it('the stop still queued when the OK end arrives (never on the wire): finished', async () => {
    const { call, stream, decide } = open();
    const stopping = stream.stop('WORKHORSE_SERVER_SHUTDOWN', 5_000);
    expect(call.written).toEqual([{ stopWorkflow: { reason: 'WORKHORSE_SERVER_SHUTDOWN' } }]);
    call.finish(grpc.status.OK);
    call.pendingWrites.shift()?.(); // the HTTP/2 stream takes the write only after the end
    await stopping;
    expect(stream.stopReachedService).toBe(false);
    expect((await decide('drain')).reason).toBe('finished');
  });

  it('the stop written, then an OK end after a checkpoint that ends the turn: finished', async () => {
    const { call, stream, decide } = open();
    call.action(checkpoint('FINISHED'));
    const stopping = stream.stop('WORKHORSE_LOCK_LOST', 5_000);
    call.pendingWrites.shift()?.();
    await new Promise((r) => setImmediate(r));
    call.finish(grpc.status.OK);
    expect(await stopping).toBe('user_stop');
    expect(stream.stopReachedService).toBe(true);
    expect(await decide('lock_lost')).toEqual({ reason: 'finished', byStop: false, endedWhileStopping: false });
  });

  it('the stop written, then an OK end after a running checkpoint: the stop decides, flagged for an infrastructure stop only', async () => {
    for (const [reason, flagged] of [
      ['run_limit', true],
      ['drain', true],
      ['lock_lost', true],
      ['stop_requested', false],
      ['client_closed', false],
      ['pong_timeout', true],
    ] as const) {
      const { call, stream, decide } = open();
      call.action(checkpoint('RUNNING'));
      const stopping = stream.stop('X', 5_000);
      call.pendingWrites.shift()?.();
      await new Promise((r) => setImmediate(r));
      call.finish(grpc.status.OK);
      await stopping;
      expect(await decide(reason), reason).toEqual({ reason, byStop: true, endedWhileStopping: flagged });
    }
  });

  it('the stop acknowledged with UNAVAILABLE is the stop, whatever the checkpoint said', async () => {
    const { call, stream, decide } = open();
    call.action(checkpoint('FINISHED'));
    const stopping = stream.stop('WORKHORSE_RUN_LIMIT', 5_000);
    call.pendingWrites.shift()?.();
    await new Promise((r) => setImmediate(r));
    call.finish(grpc.status.UNAVAILABLE);
    expect(await stopping).toBe('ack');
    expect(await decide('run_limit')).toEqual({ reason: 'run_limit', byStop: true, endedWhileStopping: false });
  });

  it('a cancel keeps its reason; no stop keeps the status', () => {
    expect(decideEnd({ ending: { by: 'cancel', reason: 'client_gone' }, code: grpc.status.OK, stopReachedService: false, lastCheckpointStatus: 'FINISHED' }).reason).toBe('client_gone');
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

  /** The infrastructure stops and their words, and the owner's stop. */
  const stops = [
    ['run_limit', 'WORKHORSE_RUN_LIMIT'],
    ['drain', 'WORKHORSE_SERVER_SHUTDOWN'],
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
        fc.boolean(), // the service lists the infrastructure word on its allowlist
        fc.boolean(), // its own end follows a checkpoint that ends the turn (the real service's does)
        async (offset, wire, takeMs, [stopReason, word], allowlisted, finalCheckpoint) => {
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
            const infra = stopReason !== 'stop_requested';
            setTimeout(() => call.finish(infra && allowlisted ? grpc.status.UNAVAILABLE : grpc.status.OK), stopArrives + wire);
          }
          let ended = false;
          void stream.ended.then(() => (ended = true));
          // The gateway: its stop fires at STOP_AT unless the run has ended (a Run's teardown came first).
          setTimeout(() => {
            if (ended) return;
            void stream.stop(word, 5_000);
            const take = (): void => call.pendingWrites.shift()?.(call.writableEnded ? new Error('stream closed') : null);
            if (takeMs === 0) take();
            else setTimeout(take, takeMs);
          }, STOP_AT);
          await vi.advanceTimersByTimeAsync(1_000);
          const decision = ended && !stream.stopReachedService && call.written.length === 0 ? await decideNoStop(stream) : await decide(stopReason);
          if (byItself) {
            // The owner is never told to resume a finished turn without being told to check first.
            if (finalCheckpoint) expect(decision.reason).toBe('finished');
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
