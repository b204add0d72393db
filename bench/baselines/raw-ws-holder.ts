/**
 * The ws_capacity baseline: one process holding N raw `ws` server sockets, each bridged
 * to a raw grpc-js ExecuteWorkflow stream (raw-grpc.ts) — the client's startRequest
 * (its first text frame) sent on a new stream, every action the stream sends forwarded
 * to the socket as one binary frame (marshalled as the gateway marshals it), the client's
 * later frames written to the stream, either side's end ending the other. Nothing else:
 * no preauth, no lock, no pings. The `ws` server has the gateway's settings (no
 * compression, frames of at most 4 MiB, no client tracking). Forked with --expose-gc
 * (and the image's allocator setting) like raw-holder.ts; the driver connects to the
 * address it reports, the same way it connects to the gateway, and reads its RSS from
 * /proc after asking it to collect.
 *
 * BENCH_WORKFLOW_URI is the workflow service, BENCH_OAUTH_TOKEN the token the owner's
 * preauth would have given, BENCH_STREAMS_PER_CONNECTION the streams per HTTP/2
 * connection (the gateway's channel pool's).
 */
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { collectAndMeasure, compactAndMeasure, type MemorySnapshot } from '../../src/core/memory-snapshot';
import { workhorseActionJson } from '../../src/workflow/action-line';
import type { Action, ClientEvent } from '../../src/workflow/contract';
import { serveIpc } from '../../stack/ipc';
import { HOST } from '../../stack/ports';
import { RawClientPool, type RawCall } from './raw-grpc';

export interface RawWsCounts {
  /** Sockets open now. */
  sockets: number;
  /** Bridges whose stream sent its first action (and it was forwarded). */
  withAction: number;
  /** Bridges whose stream ended before its first action. */
  failed: number;
  /** HTTP/2 connections to the workflow service. */
  connections: number;
}

export type RawWsHolderQueries = {
  counts: { args: Record<string, never>; result: RawWsCounts };
  /** Closes every socket, cancels every stream and closes the connections. */
  release: { args: Record<string, never>; result: null };
  /** A full GC (`compact`: the compacting GC of a low-memory notification), then the figures. */
  gc: { args: { compact?: boolean }; result: MemorySnapshot };
};

/** As the gateway's route (src/websocket/route.ts). */
const MAX_FRAME_BYTES = 4 * 1024 * 1024;

interface Bridge {
  ws: WebSocket;
  call: RawCall | undefined;
}

const workflowAddress = process.env['BENCH_WORKFLOW_URI'] ?? '';
const token = process.env['BENCH_OAUTH_TOKEN'] ?? '';
const streamsPerConnection = Number(process.env['BENCH_STREAMS_PER_CONNECTION'] ?? 100);
let pool = new RawClientPool(workflowAddress, streamsPerConnection);
const bridges = new Set<Bridge>();
let withAction = 0;
let failed = 0;

function bridge(ws: WebSocket): void {
  const held: Bridge = { ws, call: undefined };
  bridges.add(held);
  ws.on('error', () => undefined);
  ws.once('close', () => {
    bridges.delete(held);
    held.call?.stream.cancel();
  });
  ws.on('message', (data: Buffer) => {
    let event: ClientEvent & { startRequest?: { workflowID?: string; workflowMetadata?: string } };
    try {
      event = JSON.parse(data.toString('utf8')) as typeof event;
    } catch {
      ws.close(4400, 'not JSON');
      return;
    }
    if (held.call) {
      held.call.stream.write(event);
      return;
    }
    const start = event.startRequest;
    if (!start?.workflowID) {
      ws.close(4400, 'the first event must be startRequest');
      return;
    }
    const call = pool.open(start.workflowID, start.workflowMetadata ?? '', token);
    held.call = call;
    call.stream.on('data', (action: Action) => {
      ws.send(Buffer.from(JSON.stringify(workhorseActionJson(action))), { binary: true });
    });
    call.stream.once('status', () => ws.close(1000));
    call.firstAction.then(
      () => (withAction += 1),
      () => (failed += 1),
    );
  });
}

function gc({ compact }: { compact?: boolean }): MemorySnapshot | Promise<MemorySnapshot> {
  if (compact) return compactAndMeasure();
  const collect = (globalThis as { gc?: () => void }).gc;
  if (typeof collect !== 'function') throw new Error('raw-ws-holder must run with --expose-gc');
  return collectAndMeasure(collect);
}

async function main(): Promise<void> {
  if (!workflowAddress) throw new Error('BENCH_WORKFLOW_URI is required');
  const server = new WebSocketServer({ host: HOST, port: 0, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false, clientTracking: false });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  server.on('connection', bridge);
  const { port } = server.address() as AddressInfo;
  serveIpc<RawWsHolderQueries>(`http://${HOST}:${port}`, {
    counts: () => ({ sockets: bridges.size, withAction, failed, connections: pool.connections }),
    release: () => {
      for (const { ws, call } of bridges) {
        call?.stream.cancel();
        ws.terminate();
      }
      bridges.clear();
      pool.close();
      pool = new RawClientPool(workflowAddress, streamsPerConnection);
      return null;
    },
    gc,
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`raw-ws-holder: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
