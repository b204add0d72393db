import { describe, expect, it } from 'vitest';
import { awaitAcceptance, type AcceptanceListener, type AcceptanceSource } from '../../src/run/acceptance';

/** A run whose events the test fires by hand; `already` is told to the listener as it registers. */
function source(already?: (l: AcceptanceListener) => void): AcceptanceSource & { listener?: AcceptanceListener; dropped: number } {
  const src: AcceptanceSource & { listener?: AcceptanceListener; dropped: number } = {
    dropped: 0,
    watchAcceptance(listener) {
      already?.(listener);
      src.listener = listener;
      return () => {
        src.dropped += 1;
      };
    },
  };
  return src;
}

describe('awaitAcceptance', () => {
  it('a wait already spent (0 ms left) is elapsed at once: a first action that comes a moment later does not decide it', async () => {
    const run = source();
    const decided = awaitAcceptance(run, 0);
    queueMicrotask(() => run.listener?.firstAction());
    await expect(decided).resolves.toEqual({ kind: 'accepted', on: 'accept_wait_elapsed' });
    expect(run.dropped).toBe(1);
  });

  it('a wait already spent still reports what had happened by then: the first action, a stop, the end', async () => {
    await expect(
      awaitAcceptance(
        source((l) => l.firstAction()),
        0,
      ),
    ).resolves.toEqual({ kind: 'accepted', on: 'first_action' });
    await expect(
      awaitAcceptance(
        source((l) => l.stopped()),
        0,
      ),
    ).resolves.toEqual({ kind: 'stopped' });
  });

  it('within the wait, the first action decides it; at its end, the wait does', async () => {
    const run = source();
    const decided = awaitAcceptance(run, 1_000);
    run.listener?.firstAction();
    await expect(decided).resolves.toEqual({ kind: 'accepted', on: 'first_action' });
    await expect(awaitAcceptance(source(), 20)).resolves.toEqual({ kind: 'accepted', on: 'accept_wait_elapsed' });
  });
});
