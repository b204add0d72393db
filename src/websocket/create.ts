/**
 * The WebSocket part, wired from its settings (docs/spec.md §11, §12): the route the main
 * listener hands its upgrades to, the runs parked on this process, and — with Redis and a
 * resume window — the bridges to runs parked on other replicas.
 */
import type { CoordinationBackend } from '../coordination/backend';
import type { Closables } from '../core/closables';
import type { Logger } from '../core/log';
import type { Tracing } from '../observability/tracing';
import type { OwnerClient } from '../owner/owner-client';
import type { RedisSettings } from '../redis/settings';
import type { RedisTarget } from '../redis/url';
import type { Launcher } from '../run/launcher';
import { BacklogBudget } from './backlog-budget';
import { Bridges } from './bridge/bridges';
import { RedisInbox } from './bridge/inbox';
import type { ParkedRuns } from './client-run';
import type { WebSocketMetrics } from './metrics';
import { WebSocketRoute } from './route';
import type { WebSocketSettings } from './settings';

export interface WebSocketPartDeps {
  redis: RedisSettings;
  replicaId: string;
  /** Run records: where a parked run is held (bridges.ts). */
  backend: CoordinationBackend;
  launcher: Launcher;
  owner: OwnerClient;
  metrics: WebSocketMetrics;
  logger: Logger;
  tracing: Tracing;
  closables: Closables;
}

/**
 * Bridges to sessions parked on other replicas (docs/spec.md §12), over this replica's
 * Redis inbox: a beat every ping interval (at most a second), a replica silent for the
 * pong timeout counts as gone, and a claim waits as long (at least a second, at most ten).
 */
function connectBridges(settings: WebSocketSettings, deps: WebSocketPartDeps, target: RedisTarget, parked: ParkedRuns): Bridges {
  const { redis } = deps;
  const transport = new RedisInbox(target, deps.replicaId, {
    commandTimeoutMs: redis.commandTimeoutMs,
    connectTimeoutMs: redis.connectTimeoutMs,
    ttlMs: Math.max(60_000, 2 * settings.pongTimeoutMs),
  });
  return new Bridges({
    transport,
    backend: deps.backend,
    parked,
    metrics: deps.metrics,
    logger: deps.logger,
    settings: {
      beatMs: Math.min(settings.pingMs, 1_000),
      deadAfterMs: settings.pongTimeoutMs,
      claimTimeoutMs: Math.min(10_000, Math.max(1_000, settings.pongTimeoutMs)),
      stallMs: settings.writeTimeoutMs,
    },
  });
}

export function createWebSocket(settings: WebSocketSettings, deps: WebSocketPartDeps): WebSocketRoute {
  const { launcher, owner, metrics, logger, tracing } = deps;
  metrics.maxWsSessions.set(settings.maxSessions);
  const parked: ParkedRuns = new Map();
  const { target } = deps.redis;
  const bridges = target && settings.resumeWindowMs > 0 ? deps.closables.add('bridges', connectBridges(settings, deps, target, parked), (b) => b.close()) : undefined;
  return new WebSocketRoute({
    launcher,
    owner,
    metrics,
    logger,
    tracing,
    settings: {
      pingMs: settings.pingMs,
      pongTimeoutMs: settings.pongTimeoutMs,
      writeTimeoutMs: settings.writeTimeoutMs,
      closeTimeoutMs: settings.closeTimeoutMs,
      startTimeoutMs: settings.startTimeoutMs,
      resumeWindowMs: settings.resumeWindowMs,
      backlogBytes: settings.backlogBytes,
      backlogBudget: new BacklogBudget(settings.backlogBudgetBytes),
    },
    maxSessions: settings.maxSessions,
    allowedOrigins: settings.allowedOrigins,
    trustForwardedHost: settings.trustForwardedHost,
    parked,
    bridges,
  });
}
