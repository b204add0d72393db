/**
 * RunLimits on its own (docs/spec.md §3b run limit): one timer for every detached run of the
 * process, deadlines fired in order, runs that ended first struck off, nothing left armed.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RunLimits, type LimitedRun } from '../../src/run/run-limits';
import type { StopReason } from '../../src/run/stop-reasons';

class FakeRun implements LimitedRun {
  limitedAt: number | undefined;
  stop(reason: StopReason): void {
    expect(reason).toEqual({ kind: 'run_limit' });
    this.limitedAt = Date.now();
  }
}

let limits: RunLimits;

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
  limits = new RunLimits(1_000);
});
afterEach(() => {
  limits.close();
  vi.useRealTimers();
});

describe('RunLimits', () => {
  it('stops each run at its own start + limit, in order, with a single timer', async () => {
    const runs = [new FakeRun(), new FakeRun(), new FakeRun()];
    limits.add(runs[0] as FakeRun);
    await vi.advanceTimersByTimeAsync(300);
    limits.add(runs[1] as FakeRun);
    limits.add(runs[2] as FakeRun);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(699);
    expect(runs.map((r) => r.limitedAt)).toEqual([undefined, undefined, undefined]);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs[0]?.limitedAt).toBe(1_001_000);
    expect(runs[1]?.limitedAt).toBeUndefined();
    await vi.advanceTimersByTimeAsync(300);
    expect(runs[1]?.limitedAt).toBe(1_001_300);
    expect(runs[2]?.limitedAt).toBe(1_001_300);
    expect(vi.getTimerCount()).toBe(0);
    expect(limits.size).toBe(0);
  });

  it('a run that ended first is never stopped, and the timer moves on to the next', async () => {
    const [ended, next] = [new FakeRun(), new FakeRun()];
    const entry = limits.add(ended);
    await vi.advanceTimersByTimeAsync(500);
    limits.add(next);
    limits.remove(entry);
    expect(limits.size).toBe(1);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(ended.limitedAt).toBeUndefined();
    expect(next.limitedAt).toBe(1_001_500);
  });

  it('ten thousand runs cost one timer, and the queue does not grow without end', async () => {
    const runs = Array.from({ length: 10_000 }, () => new FakeRun());
    for (const run of runs) {
      limits.add(run);
      await vi.advanceTimersByTimeAsync(0.2);
    }
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(3_000);
    expect(runs.every((r) => r.limitedAt !== undefined)).toBe(true);
    expect(limits.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('runs that end before their limit leave no entry behind: the queue holds what the runs in flight need (issue [26])', () => {
    const kept = limits.add(new FakeRun());
    for (let i = 0; i < 10_000; i++) limits.remove(limits.add(new FakeRun()));
    expect(limits.size).toBe(1);
    expect(limits.queued).toBeLessThan(2 * 64);
    expect(vi.getTimerCount()).toBe(1);
    // The last run ends too: nothing is queued, no timer is left.
    limits.remove(kept);
    expect(limits.queued).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('the last run in flight struck off empties the queue and clears the timer', () => {
    const entries = Array.from({ length: 100 }, () => limits.add(new FakeRun()));
    for (const entry of entries) limits.remove(entry);
    expect(limits.queued).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('close forgets every pending limit', async () => {
    const run = new FakeRun();
    limits.add(run);
    limits.close();
    await vi.advanceTimersByTimeAsync(2_000);
    expect(run.limitedAt).toBeUndefined();
    expect(vi.getTimerCount()).toBe(0);
  });
});
