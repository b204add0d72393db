/**
 * What a process's memory looks like after a full GC, for the benchmarks (the gateway's
 * /debug/gc and the raw-stream holder answer with it): process.memoryUsage() plus V8's
 * heap spaces, so a reader can tell live objects from space V8 keeps committed (a young
 * generation grown by a burst of requests, free pages in old space), after either a plain
 * full GC or a compacting one.
 */
import { Session } from 'node:inspector';
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
  return measure();
}

/**
 * Runs the collection V8 runs on a low-memory notification (the inspector's
 * HeapProfiler.collectGarbage, in-process: no port is opened), then reads the figures.
 * Unlike gc(), it compacts fragmented old-space pages and shrinks the young generation to
 * its minimum: what V8's memory reducer does by itself once a process is quiet, which
 * took it from 20 s to over a minute after a burst of 10 000 runs.
 */
export async function compactAndMeasure(): Promise<MemorySnapshot> {
  const session = new Session();
  session.connect();
  try {
    await new Promise<void>((resolve, reject) => session.post('HeapProfiler.collectGarbage', (err) => (err ? reject(err) : resolve())));
  } finally {
    session.disconnect();
  }
  return measure();
}

function measure(): MemorySnapshot {
  const spaces: Record<string, HeapSpace> = {};
  for (const space of getHeapSpaceStatistics()) spaces[space.space_name] = { size: space.space_size, used: space.space_used_size };
  return { ...process.memoryUsage(), spaces };
}
