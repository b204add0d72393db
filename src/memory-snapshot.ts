/**
 * What a process's memory looks like after a full GC, for the benchmarks (the gateway's
 * /debug/gc and the raw-stream holder answer with it): process.memoryUsage() plus V8's
 * heap spaces, so a reader can tell live objects from space V8 keeps committed (a young
 * generation grown by a burst of requests, free pages in old space).
 */
import { getHeapSpaceStatistics } from 'node:v8';

export interface HeapSpace {
  /** Bytes V8 has committed to the space. */
  size: number;
  /** Bytes of live objects in it. */
  used: number;
}

export interface MemorySnapshot extends NodeJS.MemoryUsage {
  spaces: Record<string, HeapSpace>;
}

/** Runs two full collections (--expose-gc's gc must be given), then reads the figures. */
export function collectAndMeasure(gc: () => void): MemorySnapshot {
  gc();
  gc();
  const spaces: Record<string, HeapSpace> = {};
  for (const space of getHeapSpaceStatistics()) spaces[space.space_name] = { size: space.space_size, used: space.space_used_size };
  return { ...process.memoryUsage(), spaces };
}
