/**
 * What a holder keeps of a given-up bridge for the client's late answers (src/websocket/bridge/late-answers.ts,
 * issue [26]): the run's sink and the peer, for a bounded time and count, and never the run once it has ended.
 */
import { describe, expect, it } from 'vitest';
import { LateAnswers, LateSink } from '../../src/websocket/bridge/late-answers';
import type { ClientEvent } from '../../src/workflow/contract';

const answer = (requestID: string): ClientEvent => ({ actionResponse: { requestID, plainTextResponse: { response: 'done' } } });

function target() {
  const received: ClientEvent[] = [];
  return { received, fromClient: (event: ClientEvent) => received.push(event) > 0 };
}

describe('late answers', () => {
  it('an answer from the bridge’s peer reaches the run; from another replica, or not an answer, it does not', () => {
    const run = target();
    const late = new LateAnswers(1_000);
    late.keep('b1', 'replica-b', new LateSink(run));
    late.receive('b1', 'replica-c', answer('1'));
    late.receive('b1', 'replica-b', { heartbeat: { timestamp: '1' } });
    late.receive('b1', 'replica-b', answer('2'));
    expect(run.received).toEqual([answer('2')]);
  });

  it('an entry goes keepMs after the bridge was given up, oldest first', () => {
    let now = 0;
    const late = new LateAnswers(1_000, () => now);
    late.keep('b1', 'replica-b', new LateSink(target()));
    now = 500;
    late.keep('b2', 'replica-b', new LateSink(target()));
    now = 1_000;
    expect(late.sweep()).toBe(true);
    expect([late.has('b1'), late.has('b2')]).toEqual([false, true]);
    now = 1_500;
    expect(late.sweep()).toBe(false);
    expect(late.size).toBe(0);
  });

  it('once its run has ended, the sink lets the run go: no answer reaches it, and its entry goes at the next message', () => {
    const run = target();
    const sink = new LateSink(run);
    const late = new LateAnswers(60_000);
    late.keep('b1', 'replica-b', sink);
    sink.cut();
    expect(sink.isOver).toBe(true);
    late.receive('b1', 'replica-b', answer('1'));
    expect(run.received).toEqual([]);
    expect(late.size).toBe(0);
    // A run already ended is not kept at all.
    late.keep('b2', 'replica-b', sink);
    expect(late.size).toBe(0);
  });

  it('holds at most ten thousand entries, the oldest dropped first', () => {
    const late = new LateAnswers(60_000);
    const sink = new LateSink(target());
    for (let i = 0; i < 10_005; i++) late.keep(`b${i}`, 'replica-b', sink);
    expect(late.size).toBe(10_000);
    expect([late.has('b4'), late.has('b5'), late.has('b10004')]).toEqual([false, true, true]);
  });
});
