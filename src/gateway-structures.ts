/**
 * What this process holds per session, per link and per run, structure by structure (issue
 * [26]): the entries of every map, set, queue and timer whose size a load or a peer drives,
 * each of which must come back to 0 once the process is idle. Each part counts its own; this
 * only gathers them, as gateway-metrics.ts gathers each part's metrics. The leak tests and
 * the soak (bench/scenarios/ws-soak.ts) read them from outside, on the ops listener's
 * GET /debug/structures — mounted only with --expose-gc, as /debug/gc is: these are the
 * code's own structures, named as the code names them, not an operator's contract (the
 * metrics are), and they change as the code does.
 *
 * `held`: per session, link or run — 0 when idle. `pooled`: kept across runs on purpose
 * (the gRPC connections to each workflow service), bounded by their own rules, not by idleness.
 */
import type { CoordinationDeps } from './coordination/run-coordination';
import type { Follow } from './follow/hub';
import type { Structures } from './http/ops-app';
import type { OwnerClient } from './owner/owner-client';
import type { RunPart } from './run/create';
import type { RunRegistry } from './run/registry';
import type { WebSocketRoute } from './websocket/route';
import type { ChannelPool } from './workflow/channel-pool';

export interface StructureSources {
  registry: RunRegistry;
  run: Pick<RunPart, 'held'>;
  coordination: Pick<CoordinationDeps, 'leases' | 'stopWatcher'>;
  websockets: WebSocketRoute;
  follow: Follow;
  owner: OwnerClient;
  channels: ChannelPool;
}

const prefixed = (prefix: string, counts: Record<string, number>): Record<string, number> =>
  Object.fromEntries(Object.entries(counts).map(([name, count]) => [`${prefix}_${name}`, count]));

export function gatewayStructures(from: StructureSources): Structures {
  const { registry } = from;
  const channels = from.channels.held;
  const callbacks = from.owner.callbacksHeld;
  return {
    held: {
      runs: registry.size,
      runs_detached: registry.count('detached'),
      runs_blocking: registry.count('blocking'),
      runs_websocket: registry.count('websocket'),
      detached_slots: registry.detachedHeld,
      ...from.run.held(),
      leases: from.coordination.leases.size,
      stop_watched: from.coordination.stopWatcher.size,
      callbacks_sending: callbacks.sending,
      callbacks_waiting: callbacks.waiting,
      grpc_streams: channels.streams,
      ...prefixed('websocket', from.websockets.held),
      ...prefixed('follow', from.follow.structures),
    },
    pooled: { grpc_connections: channels.connections, grpc_targets: channels.targets },
  };
}
