/**
 * WorkflowStream on its own (docs/spec.md §4 stop handshake), driven by a fake gRPC call: how a
 * handshake ends (ack, error, timeout, already ended), that the call is ended
 * in every case, and that nothing is written to a call that has ended.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { Action } from '../../src/workflow/contract';
import { WorkflowStream } from '../../src/workflow/workflow-stream';
import { FakeCall } from '../helpers/fake-call';

function open(): { call: FakeCall; stream: WorkflowStream; actions: Action[] } {
  const call = new FakeCall();
  const actions: Action[] = [];
  const stream = new WorkflowStream(call, (action) => actions.push(action));
  return { call, stream, actions };
}

describe('WorkflowStream: the stop handshake', () => {
  // The real service: UNAVAILABLE acknowledges WORKHORSE_SERVER_SHUTDOWN, OK every other word.
  it.each([
    ['ack', 'WORKHORSE_SERVER_SHUTDOWN', grpc.status.UNAVAILABLE, grpc.status.UNAVAILABLE],
    ['ack', 'USER_STOP', grpc.status.OK, grpc.status.OK],
    ['ack', 'WORKHORSE_RUN_LIMIT', grpc.status.OK, grpc.status.OK],
    ['error', 'WORKHORSE_SERVER_SHUTDOWN', grpc.status.UNAVAILABLE, grpc.status.OK],
    ['error', 'USER_STOP', grpc.status.OK, grpc.status.UNAVAILABLE],
    ['error', 'WORKHORSE_SERVER_SHUTDOWN', grpc.status.UNAVAILABLE, grpc.status.INTERNAL],
  ] as const)('ends as %s when %s (acknowledged with %i) ends with code %i', async (outcome, word, ack, code) => {
    const { call, stream } = open();
    const stopping = stream.stop(word, ack, 5_000);
    expect(call.written).toEqual([{ stopWorkflow: { reason: word } }]);
    call.finish(code);
    expect(await stopping).toBe(outcome);
    expect(await stream.ended).toMatchObject({ code });
    expect(call.cancels).toBe(0);
  });

  it('cancels the call after the ack timeout when the service never answers', async () => {
    const { call, stream } = open();
    const started = performance.now();
    expect(await stream.stop('USER_STOP', grpc.status.OK, 50)).toBe('timeout');
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
    expect(call.cancels).toBe(1);
    expect(await stream.ended).toMatchObject({ code: grpc.status.CANCELLED });
  });

  it('a second stop waits for the first and reports already_ended; a stop after the end writes nothing', async () => {
    const { call, stream } = open();
    const first = stream.stop('WORKHORSE_SERVER_SHUTDOWN', grpc.status.UNAVAILABLE, 5_000);
    const second = stream.stop('USER_STOP', grpc.status.OK, 5_000);
    call.finish(grpc.status.UNAVAILABLE);
    expect(await first).toBe('ack');
    expect(await second).toBe('already_ended');
    expect(await stream.stop('USER_STOP', grpc.status.OK, 5_000)).toBe('already_ended');
    expect(call.written).toEqual([{ stopWorkflow: { reason: 'WORKHORSE_SERVER_SHUTDOWN' } }]);
  });
});

describe('WorkflowStream: events', () => {
  it('hands every action over, in order', () => {
    const { call, actions } = open();
    call.action({ requestID: '1', action: 'newCheckpoint', newCheckpoint: { checkpoint: 'a' } });
    call.action({ requestID: '2', action: 'runHTTPRequest', runHTTPRequest: { path: '/api/v4/x' } });
    expect(actions.map((a) => a.requestID)).toEqual(['1', '2']);
  });

  it('after the call ended: actions are dropped, responses and starts are not written, cancel does nothing', async () => {
    const { call, stream, actions } = open();
    const started = stream.sendStart({ workflowID: '1' });
    call.finish(grpc.status.OK);
    expect(await started).toBe('ended');
    await stream.ended;
    call.action({ requestID: '9', action: 'newCheckpoint' });
    expect(actions).toEqual([]);
    expect(stream.respond({ requestID: '9', plainTextResponse: { response: 'late' } })).toBe(false);
    stream.cancel();
    expect(call.cancels).toBe(0);
    expect(call.written).toEqual([{ startRequest: { workflowID: '1' } }]);
  });

  it('the first status wins: ended resolves once, with it', async () => {
    const { call, stream } = open();
    call.finish(grpc.status.UNAVAILABLE, 'first');
    call.emit('status', { code: grpc.status.OK, details: 'second', metadata: new grpc.Metadata() });
    expect(await stream.ended).toEqual({ code: grpc.status.UNAVAILABLE, details: 'first' });
  });
});

describe('WorkflowStream: start and reading', () => {
  it('sendStart resolves written only once the call took the write, or ended when the call ends first', async () => {
    const { call, stream } = open();
    let outcome: string | undefined;
    void stream.sendStart({ workflowID: '1' }).then((o) => (outcome = o));
    await new Promise((r) => setImmediate(r));
    expect(outcome).toBeUndefined();
    call.pendingWrites.shift()?.();
    await new Promise((r) => setImmediate(r));
    expect(outcome).toBe('written');

    const other = open();
    const pending = other.stream.sendStart({ workflowID: '2' });
    other.call.cancel();
    expect(await pending).toBe('ended');
  });

  it('an OK status with checkpoints still unread ends the stream only once they are read', async () => {
    const { call, stream } = open();
    let ended = false;
    void stream.ended.then(() => (ended = true));
    stream.pause();
    expect(call.paused).toBe(true);
    call.finish(grpc.status.OK, '', false);
    await new Promise((r) => setImmediate(r));
    expect(ended).toBe(false);
    stream.resume();
    call.emit('end');
    expect(await stream.ended).toMatchObject({ code: grpc.status.OK });
  });

  it('cancelling a call whose OK status is in but whose last messages were never read ends it with that status', async () => {
    const { call, stream } = open();
    call.finish(grpc.status.OK, 'done', false);
    stream.cancel();
    expect(call.cancels).toBe(0);
    expect(await stream.ended).toEqual({ code: grpc.status.OK, details: 'done' });
  });
});
