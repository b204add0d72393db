/**
 * The benchmarks' memory figures (bench/scenarios/capacity.ts) are read after
 * compactAndMeasure: it must leave the young generation at its minimum and old space
 * compacted, whatever a burst of allocation left behind.
 */
import { getHeapSpaceStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { compactAndMeasure } from '../../src/core/memory-snapshot';

const MiB = 1024 * 1024;

function newSpaceSize(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
}

describe('compactAndMeasure', () => {
  it('shrinks a young generation grown by a burst and reports every heap space', async () => {
    // A burst: objects that live across a few scavenges, as an execute's do, make V8 grow
    // the young generation.
    let alive: unknown[] = [];
    const kept: unknown[] = [];
    for (let i = 0; i < 400_000; i++) {
      alive.push({ i, text: `item ${i}`, list: [i, i + 1, i + 2] });
      if (alive.length > 40_000) alive = alive.slice(20_000);
      if (i % 100 === 0) kept.push({ i });
    }
    alive = [];
    const grown = newSpaceSize();
    expect(grown).toBeGreaterThan(2 * MiB);

    const snapshot = await compactAndMeasure();

    expect(snapshot.spaces['new_space']?.size).toBeLessThan(grown);
    expect(snapshot.spaces['new_space']?.size).toBeLessThanOrEqual(2 * MiB);
    const old = snapshot.spaces['old_space'];
    expect(old?.used).toBeGreaterThan(0);
    expect(old?.used).toBeLessThanOrEqual(old?.size ?? 0);
    expect(snapshot.rss).toBeGreaterThan(snapshot.heapUsed);
    expect(kept).toHaveLength(4_000);
  });
});
