/**
 * What this process holds per session, per link and per run, structure by structure (issue
 * [26]): the entries of every map, set, queue and timer whose size a load or a peer drives,
 * each of which must come back to 0 once the process is idle. The leak tests and the soak
 * (bench/scenarios/ws-soak.ts) read them from outside, on the ops listener's
 * GET /debug/structures — mounted only with --expose-gc, as /debug/gc is: these are the
 * code's own structures, named as the code names them, not an operator's contract (the
 * metrics are), and they change as the code does.
 *
 * `held`: per session, link or run — 0 when idle. `pooled`: kept across runs on purpose
 * (the gRPC connections to each workflow service), bounded by their own rules, not by idleness.
 */
import type { LeaseKeeper } from '../coordination/lease-keeper';
import type { StopWatcher } from '../coordination/stop-watcher';
import type { OwnerClient } from '../owner/owner-client';
import type { RunLimits } from '../run/run-limits';
import type { RunRegistry } from '../run/registry';
import type { Watch } from '../watch/hub';
import type { BacklogBudget } from '../websocket/backlog-budget';
import type { Bridges } from '../websocket/bridge/bridges';
import type { WebSocketRoute } from '../websocket/route';
import type { ChannelPool } from '../workflow/channel-pool';

export interface StructureSources {
  registry: RunRegistry;
  runLimits: RunLimits;
  leases: LeaseKeeper;
  stopWatcher: StopWatcher;
  websockets: WebSocketRoute;
  backlogBudget: BacklogBudget;
  bridges: Bridges | undefined;
  watch: Watch;
  owner: OwnerClient;
  channels: ChannelPool;
}

export interface Structures {
  held: Record<string, number>;
  pooled: Record<string, number>;
}

const prefixed = (prefix: string, counts: Record<string, number>): Record<string, number> =>
  Object.fromEntries(Object.entries(counts).map(([name, count]) => [`${prefix}_${name}`, count]));

export function structures(from: StructureSources): Structures {
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
      run_limits: from.runLimits.size,
      run_limits_queued: from.runLimits.queued,
      leases: from.leases.size,
      stop_watched: from.stopWatcher.size,
      callbacks_sending: callbacks.sending,
      callbacks_waiting: callbacks.waiting,
      grpc_streams: channels.streams,
      ...prefixed('websocket', from.websockets.held),
      websocket_backlog_bytes: from.backlogBudget.usedBytes,
      ...(from.bridges ? prefixed('bridge', from.bridges.held) : {}),
      ...prefixed('watch', from.watch.structures),
    },
    pooled: { grpc_connections: channels.connections, grpc_targets: channels.targets },
  };
}
