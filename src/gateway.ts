/**
 * The gateway process's parts, assembled: each wired from its own section of the Config by
 * its own `create…()` (tracing, owner client, channel pool, coordination, MCP connector, the
 * follow, the run launcher, the WebSocket route, the main and ops listeners), each handed its
 * own metrics. SIGTERM turns readiness 503 at once and new executes 503 DRAINING, then
 * drain.ts stops the runs in flight; then every part closes, in the reverse of the order it
 * was added.
 */
import type { RequestHandler } from 'express';
import type { Config } from './config';
import { drain } from './drain';
import { GatewayMetrics } from './gateway-metrics';
import { gatewayStructures } from './gateway-structures';
import { Closables } from './core/closables';
import { createLogger, type Logger } from './core/log';
import { createTracing } from './observability/create';
import type { Tracing } from './observability/tracing';
import type { CoordinationBackend } from './coordination/backend';
import { createCoordination } from './coordination/create';
import { RedisBackend } from './coordination/redis-backend';
import { createHttp, urlOf, type Listeners } from './http/create';
import { listRuns } from './http/ops-app';
import { createMcp } from './mcp/create';
import { createOwner } from './owner/create';
import { createRun } from './run/create';
import { RunRegistry } from './run/registry';
import { createChannelPool } from './workflow/create';
import { createFollow } from './follow/create';
import type { Follow } from './follow/hub';
import { followRoutes } from './follow/route';
import { createWebSocket } from './websocket/create';
import { websocketHttpRoutes, type WebSocketRoute } from './websocket/route';

type GatewayState = 'serving' | 'draining' | 'closed';

export interface GatewayOptions {
  logger?: Logger;
  /**
   * Routes mounted on the main listener before its 404: the sandbox's own pages
   * (sandbox/chat-page.ts). Only the sandbox passes any; a gateway with an owner has none.
   */
  sandboxRoutes?: RequestHandler;
  /**
   * Spans go here instead of where config.observability.tracing says (tests: a tracer on the
   * SDK's in-memory exporter). The gateway does not close it.
   */
  tracing?: Tracing;
}

/** What the gateway keeps of its parts, by name: what its accessors, the drain and the close use. */
interface GatewayParts {
  config: Config;
  logger: Logger;
  metrics: GatewayMetrics;
  registry: RunRegistry;
  backend: CoordinationBackend;
  listeners: Listeners;
  /** The WebSocket sessions of the main listener (docs/spec.md §11). */
  websockets: WebSocketRoute;
  /** Following runs (docs/spec.md §14). */
  follow: Follow;
  /** Bounds segment-end callbacks; aborted when the drain's budget is spent. */
  callbackBudget: AbortController;
  tracing: Tracing;
}

/** How long close() waits for parts to close gracefully before destroying them. */
const CLOSE_TIMEOUT_MS = 5_000;

/**
 * Makes every part, in the order each needs the ones before it; each adds what it opened to
 * `closables`, which closes them in reverse. `isDraining` is the gateway's state, read later.
 */
async function assemble(
  config: Config,
  options: GatewayOptions,
  base: { logger: Logger; metrics: GatewayMetrics; closables: Closables; isDraining(): boolean },
): Promise<GatewayParts> {
  const { logger, metrics, closables, isDraining } = base;
  const { replicaId, redis } = config;
  // Added first, so closed last: the spans of everything closed before it are sent.
  const tracing = options.tracing ?? createTracing(config.observability, { metrics: metrics.process, logger, replicaId, closables });
  const owner = createOwner(config.owner, { metrics: metrics.owner, tracing, closables });
  const channels = createChannelPool(config.workflow, { closables });
  const coordination = await createCoordination(config.coordination, { redis, metrics: metrics.coordination, logger, closables });
  const { backend } = coordination;
  const mcp = createMcp(config.mcp, { owner: config.owner, metrics: metrics.mcp, logger, tracing, closables });
  // Before the follow, which reports the runs it holds, and the launcher, which adds them.
  const registry = new RunRegistry(config.run.maxDetachedRuns);
  const follow = createFollow(config.follow, { redis, backend, registry, metrics: metrics.follow, replicaId, logger, closables });
  const run = createRun(config.run, {
    coordination,
    registry,
    owner,
    channels,
    mcp,
    mcpDiscoveryTimeoutMs: config.mcp.discoveryTimeoutMs,
    callbackConcurrency: config.owner.callbackConcurrency,
    follow,
    isDraining,
    metrics: metrics.run,
    logger,
    tracing,
    replicaId,
    closables,
  });
  const { launcher, callbackBudget } = run;
  const websockets = createWebSocket(config.websocket, { redis, replicaId, backend, launcher, owner, metrics: metrics.websocket, logger, tracing, closables });
  const checkServing = (): void => launcher.checkServing();
  const listeners = await createHttp(config.http, {
    main: {
      launcher,
      owner,
      metrics: metrics.run,
      logger,
      tracing,
      secret: config.owner.secret,
      backend,
      stopKeyTtlMs: config.coordination.stopKeyTtlMs,
      sandboxRoutes: options.sandboxRoutes,
      routes: [websocketHttpRoutes(logger), followRoutes({ follow, owner, checkServing, logger })],
    },
    ops: {
      metrics: metrics.process,
      registry,
      isDraining,
      followersOf: (id) => follow.followersOf(id),
      structures: () => gatewayStructures({ registry, run, coordination, websockets, follow, owner, channels }),
    },
    onUpgrade: (req, socket, head) => websockets.handleUpgrade(req, socket, head),
    closables,
  });
  // Closed first (the list closes last-in first): callbacks stop waiting, runs still in
  // flight are cancelled — a listener waits for its open blocking streams to end, and
  // a run's teardown needs the backend and the owner client, closed after.
  closables.add('runs in flight', registry, (r) => r.cancelAll());
  // An upgraded socket is no longer the listener's to close.
  closables.add('websocket sessions', websockets, (w) => w.terminateAll());
  // Before the main listener's close, which waits for its open responses: a follow stream never ends by itself.
  closables.add('follow streams', follow, (f) => f.endAll('closing'));
  closables.add('callback budget', callbackBudget, (c) => c.abort());
  return { config, logger, metrics, registry, backend, listeners, websockets, follow, callbackBudget, tracing };
}

export class Gateway {
  private state: GatewayState = 'serving';
  private draining: Promise<void> | undefined;
  private closing: Promise<'closed' | 'forced'> | undefined;

  private constructor(
    private readonly parts: GatewayParts,
    private readonly closables: Closables,
  ) {}

  get config(): Config {
    return this.parts.config;
  }

  get logger(): Logger {
    return this.parts.logger;
  }

  /** Every metric, by part (gateway-metrics.ts). */
  get metrics(): GatewayMetrics {
    return this.parts.metrics;
  }

  get registry(): RunRegistry {
    return this.parts.registry;
  }

  get backend(): CoordinationBackend {
    return this.parts.backend;
  }

  /** Following runs (docs/spec.md §14). */
  get follow(): Follow {
    return this.parts.follow;
  }

  /** What /runs lists: the runs in flight here, each with its workflow's followers. */
  runs(): ReturnType<typeof listRuns> {
    return listRuns({ registry: this.parts.registry, followersOf: (id) => this.parts.follow.followersOf(id) });
  }

  /** Starts both listeners. Throws when a listener cannot bind (everything made so far is closed). */
  static async start(config: Config, options: GatewayOptions = {}): Promise<Gateway> {
    const logger = options.logger ?? createLogger(config.logLevel);
    const metrics = new GatewayMetrics();
    const closables = new Closables();
    let gateway: Gateway | undefined;
    const isDraining = (): boolean => gateway?.state !== 'serving';
    try {
      gateway = new Gateway(await assemble(config, options, { logger, metrics, closables, isDraining }), closables);
    } catch (err) {
      await closables.closeAll(CLOSE_TIMEOUT_MS);
      throw err;
    }
    // The Redis URL is shown with its credentials masked (describeRedisTarget).
    const redis = gateway.backend instanceof RedisBackend ? gateway.backend.display : undefined;
    logger.info({ listen: gateway.mainUrl, ops: gateway.opsUrl, lock: gateway.backend.kind, redis, replica: config.replicaId }, 'longrun listening');
    return gateway;
  }

  get mainUrl(): string {
    return urlOf(this.parts.listeners.main);
  }

  get opsUrl(): string {
    return urlOf(this.parts.listeners.ops);
  }

  /**
   * Drains and closes (SIGTERM). Idempotent. Every run in flight is stopped with
   * WORKHORSE_SERVER_SHUTDOWN within the drain budget; locks are released; segment-end
   * callbacks are sent while the budget lasts.
   */
  drain(): Promise<void> {
    if (this.state === 'serving') this.state = 'draining';
    const { config, logger, metrics, registry, websockets, follow, callbackBudget, tracing } = this.parts;
    this.draining ??= drain({
      settings: config.drain,
      stopAckTimeoutMs: config.run.stopAckTimeoutMs,
      logger,
      metrics: metrics.process,
      registry,
      websockets,
      follow,
      callbackBudget,
      tracing,
      close: (timeoutMs) => this.close(timeoutMs),
    });
    return this.draining;
  }

  /**
   * Closes every part (runs still in flight are cancelled). Idempotent: every caller gets
   * the first call's promise. Parts not closed within `timeoutMs` are destroyed.
   */
  close(timeoutMs: number = CLOSE_TIMEOUT_MS): Promise<'closed' | 'forced'> {
    this.closing ??= (async () => {
      this.state = 'closed';
      return this.closables.closeAll(timeoutMs);
    })();
    return this.closing;
  }
}
