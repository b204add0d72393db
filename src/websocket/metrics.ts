/**
 * The WebSocket route's metrics (docs/operating.md "WebSocket sessions"): sessions and their
 * cap, frames and bytes each way, the close codes sent, parked runs — parked, re-attached,
 * given up, their backlogs — and the bridges between replicas. A session refused before its
 * run is counted with the run's (run/metrics.ts), as the route's words say it.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ConnectionErrorType } from '../core/errors';
import { oneOf, PartMetrics } from '../observability/metric-helpers';
import type { RunMetrics } from '../run/metrics';
import type { BridgeHeader } from './bridge/protocol';
import { bridgeBreakWhys, parkEndReasons, type BridgeBreakWhy, type ParkEndReason } from './words';

/** The close codes the gateway sends (close-codes.ts), as metric labels. */
const websocketCloseCodes = ['1000', '1001', '1008', '1009', '1012', '1013', '4400'] as const;
/** How a parked run was re-attached: on this replica, or through a bridge from another. */
const reattachHows = ['local', 'bridged'] as const;
/** A bridge's side on this replica: the run's holder, or the client's socket. */
const bridgeSides = ['holder', 'socket'] as const;
type BridgeSide = (typeof bridgeSides)[number];
const directions = ['in', 'out'] as const;

export class WebSocketMetrics extends PartMetrics {
  readonly websocketFrames = new Counter({
    name: 'longrun_websocket_frames_total',
    help: 'WebSocket frames, by direction (in: from the client).',
    labelNames: ['direction'],
    registers: [this.registry],
  });
  readonly websocketBytes = new Counter({
    name: 'longrun_websocket_bytes_total',
    help: 'WebSocket payload bytes, by direction (in: from the client).',
    labelNames: ['direction'],
    registers: [this.registry],
  });
  readonly websocketCloses = new Counter({
    name: 'longrun_websocket_closes_total',
    help: 'Close frames the gateway sent, by code.',
    labelNames: ['code'],
    registers: [this.registry],
  });
  readonly websocketParked = new Counter({
    name: 'longrun_websocket_parked_total',
    help: 'WebSocket sessions whose connection was lost while their run went on (parked).',
    registers: [this.registry],
  });
  readonly websocketReattaches = new Counter({
    name: 'longrun_websocket_reattached_total',
    help: 'Parked WebSocket runs a new connection took over, by how (local: on this replica; bridged: from another, through Redis), counted on the replica holding the run.',
    labelNames: ['how'],
    registers: [this.registry],
  });
  readonly websocketParkEnds = new Counter({
    name: 'longrun_websocket_park_ends_total',
    help: 'Parked WebSocket runs longrun stopped, by why (expired, backlog_full, backlog_budget, taken_over).',
    labelNames: ['why'],
    registers: [this.registry],
  });
  readonly bridgesOpen = new Gauge({
    name: 'longrun_bridges_open',
    help: "Bridged WebSocket sessions, by this replica's side (holder: it holds the run; socket: the client's socket).",
    labelNames: ['side'],
    registers: [this.registry],
  });
  readonly bridgeMessages = new Counter({
    name: 'longrun_bridge_messages_total',
    help: 'Bridge messages sent to other replicas through Redis, by kind.',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly bridgeBreaks = new Counter({
    name: 'longrun_bridge_breaks_total',
    help: 'Bridges given up, by why (gap: a message lost; send_failed; peer_silent: no beat within LONGRUN_WS_PONG_TIMEOUT_MS; peer_dropped: the other side no longer lists it; unanswered: a claim not answered).',
    labelNames: ['why'],
    registers: [this.registry],
  });
  readonly websocketBacklogBytes = new Gauge({ name: 'longrun_websocket_backlog_bytes', help: 'Bytes of frames kept for parked WebSocket runs.', registers: [this.registry] });
  readonly websocketReattachDuration = new Histogram({
    name: 'longrun_websocket_reattach_seconds',
    help: 'A parked WebSocket run: its connection lost → a new one attached and replayed to.',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });
  readonly websocketSessionsOpen = new Gauge({
    name: 'longrun_websocket_sessions_open',
    help: 'WebSocket sessions held now (LONGRUN_MAX_WS_SESSIONS caps them).',
    registers: [this.registry],
  });
  readonly maxWsSessions = new Gauge({
    name: 'longrun_max_ws_sessions',
    help: 'LONGRUN_MAX_WS_SESSIONS: the WebSocket sessions this process may hold.',
    registers: [this.registry],
  });

  constructor(
    registry: Registry,
    /** Where refused sessions are counted, with every transport's refused starts. */
    private readonly run: RunMetrics,
  ) {
    super(registry);
    for (const how of reattachHows) this.websocketReattaches.inc({ how }, 0);
    for (const why of bridgeBreakWhys) this.bridgeBreaks.inc({ why }, 0);
    for (const side of bridgeSides) this.bridgesOpen.set({ side }, 0);
    for (const why of parkEndReasons) this.websocketParkEnds.inc({ why }, 0);
    for (const direction of directions) {
      this.websocketFrames.inc({ direction }, 0);
      this.websocketBytes.inc({ direction }, 0);
    }
    for (const code of websocketCloseCodes) this.websocketCloses.inc({ code }, 0);
  }

  /** A WebSocket frame of `bytes`, from the client ('in') or to it ('out'). */
  websocketFrame(direction: (typeof directions)[number], bytes: number): void {
    this.websocketFrames.inc({ direction });
    this.websocketBytes.inc({ direction }, bytes);
  }

  /** A parked run a new connection took over after `lostForS`. */
  websocketReattached(how: (typeof reattachHows)[number], lostForS: number): void {
    this.websocketReattaches.inc({ how });
    this.websocketReattachDuration.observe(lostForS);
  }

  /** A parked run longrun stopped. */
  websocketParkEnd(why: ParkEndReason): void {
    this.websocketParkEnds.inc({ why });
  }

  /** A close frame the gateway sent, by code (Workhorse's codes; anything else `other`). */
  websocketClose(code: number): void {
    this.websocketCloses.inc({ code: oneOf(String(code), websocketCloseCodes) });
  }

  /** A bridge message sent to another replica. */
  bridgeMessage(kind: BridgeHeader['t']): void {
    this.bridgeMessages.inc({ kind });
  }

  bridgeBroke(why: BridgeBreakWhy): void {
    this.bridgeBreaks.inc({ why });
  }

  bridgeOpened(side: BridgeSide): void {
    this.bridgesOpen.inc({ side });
  }

  bridgeClosed(side: BridgeSide): void {
    this.bridgesOpen.dec({ side });
  }

  /** A session refused before its run started (longrun_connection_errors_total). */
  connectionError(transport: 'websocket', errorType: ConnectionErrorType): void {
    this.run.connectionError(transport, errorType);
  }

  /** A session refused by the process's cap (longrun_cap_rejections_total). */
  capRejection(cap: 'websocket'): void {
    this.run.capRejection(cap);
  }
}
