/**
 * The capacity baseline (docs/spec.md §10): one process holding N raw grpc-js ExecuteWorkflow
 * streams, each of which got its first action, with nothing else in the process. Forked
 * with --expose-gc; the driver reads its RSS from /proc after asking it to collect.
 */
import { serveIpc } from '../../stack/ipc';
import { RawClientPool, type RawCall } from './raw-grpc';
import { collectAndMeasure, compactAndMeasure, type MemorySnapshot } from '../../src/core/memory-snapshot';

export interface HoldRequest {
  address: string;
  prefix: string;
  count: number;
  /** Streams being opened at once (a bounded ramp, as the gateway's load generator does). */
  concurrency: number;
  streamsPerConnection: number;
  workflowMetadata: string;
  token: string;
}

export interface HoldResult {
  held: number;
  failed: number;
  elapsedMs: number;
  connections: number;
}

export type RawHolderQueries = {
  hold: { args: HoldRequest; result: HoldResult };
  /** Cancels every held stream and closes the connections. */
  release: { args: Record<string, never>; result: null };
  /** A full GC (`compact`: the compacting GC of a low-memory notification), then the figures. */
  gc: { args: { compact?: boolean }; result: MemorySnapshot };
};

const held: RawCall[] = [];
let pool: RawClientPool | undefined;

async function hold(req: HoldRequest): Promise<HoldResult> {
  const clients = (pool ??= new RawClientPool(req.address, req.streamsPerConnection));
  const started = performance.now();
  let next = 0;
  let failed = 0;
  const worker = async (): Promise<void> => {
    while (next < req.count) {
      const i = next++;
      const call = clients.open(`${req.prefix}${i}`, req.workflowMetadata, req.token);
      try {
        await call.firstAction;
        held.push(call);
      } catch {
        failed += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(req.concurrency, req.count) }, () => worker()));
  return { held: held.length, failed, elapsedMs: performance.now() - started, connections: clients.connections };
}

function gc({ compact }: { compact?: boolean }): MemorySnapshot | Promise<MemorySnapshot> {
  if (compact) return compactAndMeasure();
  const collect = (globalThis as { gc?: () => void }).gc;
  if (typeof collect !== 'function') throw new Error('raw-holder must run with --expose-gc');
  return collectAndMeasure(collect);
}

serveIpc<RawHolderQueries>('', {
  hold,
  release: () => {
    for (const call of held) call.stream.cancel();
    held.length = 0;
    pool?.close();
    pool = undefined;
    return null;
  },
  gc,
});
