/**
 * The gateway process's parts, assembled: owner client, channel pool, lock backend,
 * stop watcher, run registry, launcher, metrics, the main and ops listeners. SIGTERM
 * turns readiness 503 at once and new executes 503 DRAINING, then drain.ts stops the
 * runs in flight; then every part closes, in the reverse of the order it was added.
 */
import { setMaxListeners } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { RequestHandler } from 'express';
import type { Config } from './config';
import type { ListenAddress } from './http/settings';
import { drain } from './drain';
import { createLogger, type Logger } from './core/log';
import { GatewayMetrics } from './gateway-metrics';
import type { CoordinationMetrics } from './coordination/metrics';
import type { WebSocketMetrics } from './websocket/metrics';
import { startTracing } from './observability/trace-export';
import type { Tracing } from './observability/tracing';
import type { CoordinationBackend } from './coordination/backend';
import { LeaseKeeper } from './coordination/lease-keeper';
import { MemoryBackend } from './coordination/memory-backend';
import { RedisBackend } from './coordination/redis-backend';
import { StopWatcher } from './coordination/stop-watcher';
import { createMainListener } from './http/main-app';
import { createOpsApp, listRuns } from './http/ops-app';
import { WebSocketRoute, websocketHttpRoutes } from './websocket/route';
import type { ParkedRuns } from './websocket/client-run';
import { BacklogBudget } from './websocket/backlog-budget';
import { Bridges } from './websocket/bridge/bridges';
import { RedisInbox } from './websocket/bridge/inbox';
import { McpConnector } from './mcp/connector';
import { OwnerClient } from './owner/owner-client';
import { Launcher } from './run/launcher';
import { RunRegistry } from './run/registry';
import { RunLimits } from './run/run-limits';
import { StopReasons } from './run/stop-reasons';
import { ChannelPool } from './workflow/channel-pool';
import { INTEREST_TTL_MS, Follow } from './follow/hub';
import type { FollowLog } from './follow/log';
import { MemoryFollowLog } from './follow/memory-log';
import { RedisFollowLog } from './follow/redis-log';
import { followRoutes } from './follow/route';

type GatewayState = 'serving' | 'draining' | 'closed';

export interface GatewayOptions {
  logger?: Logger;
  /**
   * Routes mounted on the main listener before its 404: the sandbox's own pages
   * (sandbox/chat-page.ts). Only the sandbox passes any; a gateway with an owner has none.
   */
  sandboxRoutes?: RequestHandler;
  /**
   * Spans go here instead of where config.observability.tracing says (tests: a tracer on the SDK's
   * in-memory exporter). The gateway does not close it.
   */
  tracing?: Tracing;
}

/** Everything a gateway is made of, by name. */
interface GatewayParts {
  config: Config;
  logger: Logger;
  metrics: GatewayMetrics;
  registry: RunRegistry;
  owner: OwnerClient;
  channels: ChannelPool;
  backend: CoordinationBackend;
  leases: LeaseKeeper;
  stopWatcher: StopWatcher;
  launcher: Launcher;
  stopReasons: StopReasons;
  mainServer: http.Server;
  opsServer: http.Server;
  /** The WebSocket sessions of the main listener (docs/spec.md §11). */
  websockets: WebSocketRoute;
  /** Following runs (docs/spec.md §14). */
  follow: Follow;
  /** Bounds segment-end callbacks; aborted when the drain's budget is spent. */
  callbackBudget: AbortController;
  tracing: Tracing;
}

/**
 * A part to close. `close()` is graceful and may wait (open connections, queued
 * commands); `destroy()` ends it at once, for when the time to close is spent.
 */
interface Closable {
  name: string;
  close(): Promise<void> | void;
  destroy?(): void;
}

/** How long Redis may take to answer at start before the gateway serves without it. */
const REDIS_STARTUP_WAIT_MS = 5_000;
/** How long close() waits for parts to close gracefully before destroying them. */
const CLOSE_TIMEOUT_MS = 5_000;
/** The longest the exporter may take to send the last spans when the gateway closes (a drain gives it less: drain.ts). */
const TRACE_FLUSH_MS = 1_000;

function listen(listener: http.RequestListener, address: ListenAddress): Promise<http.Server> {
  return new Promise((resolve, reject) => {
    const server = http.createServer(listener).listen(address.port, address.host);
    server.once('listening', () => resolve(server));
    server.once('error', reject);
  });
}

function urlOf(server: http.Server): string {
  const { address, port } = server.address() as AddressInfo;
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}

/**
 * Closes parts in the reverse of the order they were added; every step runs whatever the
 * others do. What has not closed within `withinMs` (a hung owner, a paused Redis) is
 * destroyed, so nothing keeps the process alive past it.
 */
async function closeAll(closables: Closable[], withinMs: number): Promise<'closed' | 'forced'> {
  const pending = [...closables].reverse();
  const graceful = (async () => {
    for (const part of [...pending]) {
      try {
        await part.close();
      } catch {
        // Closing is best effort: the process is leaving.
      }
      pending.shift();
    }
  })();
  let timer: NodeJS.Timeout | undefined;
  const spent = new Promise<'forced'>((resolve) => (timer = setTimeout(() => resolve('forced'), withinMs)));
  const outcome = await Promise.race([graceful.then(() => 'closed' as const), spent]);
  clearTimeout(timer);
  if (outcome === 'forced') {
    for (const part of pending) {
      try {
        part.destroy?.();
      } catch {
        // As above.
      }
    }
  }
  return outcome;
}

function connectBackend(config: Config, metrics: CoordinationMetrics, logger: Logger, onReconnected: () => void): CoordinationBackend {
  const { redis } = config;
  if (!redis.target) return new MemoryBackend();
  // The backend logs each outage and each (re)connection once; every event is counted.
  return new RedisBackend(redis.target, {
    commandTimeoutMs: redis.commandTimeoutMs,
    connectTimeoutMs: redis.connectTimeoutMs,
    configureNotifications: config.coordination.configureNotifications,
    logger,
    onEvent: (connection, event) => {
      metrics.redisEvent(connection, event);
      if (connection === 'commands' && event === 'ready') onReconnected();
    },
  });
}

/**
 * Bridges to sessions parked on other replicas (docs/spec.md §12), over this replica's
 * Redis inbox: a beat every ping interval (at most a second), a replica silent for the
 * pong timeout counts as gone, and a claim waits as long (at least a second, at most ten).
 */
function connectBridges(config: Config, backend: CoordinationBackend, parked: ParkedRuns, metrics: WebSocketMetrics, logger: Logger): Bridges {
  const { redis, websocket } = config;
  const transport = new RedisInbox(redis.target as NonNullable<Config['redis']['target']>, config.replicaId, {
    commandTimeoutMs: redis.commandTimeoutMs,
    connectTimeoutMs: redis.connectTimeoutMs,
    ttlMs: Math.max(60_000, 2 * websocket.pongTimeoutMs),
  });
  return new Bridges({
    transport,
    backend,
    parked,
    metrics,
    logger,
    settings: {
      beatMs: Math.min(websocket.pingMs, 1_000),
      deadAfterMs: websocket.pongTimeoutMs,
      claimTimeoutMs: Math.min(10_000, Math.max(1_000, websocket.pongTimeoutMs)),
      stallMs: websocket.writeTimeoutMs,
    },
  });
}

/**
 * Where followed workflows' events are kept (docs/spec.md §14): Redis, shared by the replicas,
 * or this process's memory without it. A log lives one announcement TTL past its last use.
 */
function followLogOf(config: Config, logger: Logger): FollowLog {
  const { redis } = config;
  const settings = { ttlMs: INTEREST_TTL_MS, backlog: config.follow.backlogEvents };
  if (!redis.target) return new MemoryFollowLog(settings);
  let warned = false;
  return new RedisFollowLog(
    redis.target,
    config.replicaId,
    { ...settings, commandTimeoutMs: redis.commandTimeoutMs, connectTimeoutMs: redis.connectTimeoutMs },
    // The coordination backend logs each outage; this connection's errors are said once.
    (err) => {
      if (!warned) logger.warn({ err: err.message }, 'follow log: redis connection error (follow streams answer 503 until it heals)');
      warned = true;
    },
  );
}

export class Gateway {
  private state: GatewayState = 'serving';
  private draining: Promise<void> | undefined;
  private closing: Promise<'closed' | 'forced'> | undefined;

  private constructor(
    private readonly parts: GatewayParts,
    private readonly closables: Closable[],
  ) {}

  get config(): Config {
    return this.parts.config;
  }

  get logger(): Logger {
    return this.parts.logger;
  }

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
    metrics.run.maxDetachedRuns.set(config.run.maxDetachedRuns);
    metrics.websocket.maxWsSessions.set(config.websocket.maxSessions);
    const closables: Closable[] = [];
    const own = <T extends object>(name: string, part: T, close: (part: T) => Promise<void> | void, destroy?: (part: T) => void): T => {
      closables.push({ name, close: () => close(part), ...(destroy ? { destroy: () => destroy(part) } : {}) });
      return part;
    };
    let gateway: Gateway | undefined;
    let leases: LeaseKeeper | undefined;
    try {
      // Added first, so closed last: the spans of everything closed before it are sent.
      const tracing =
        options.tracing ??
        own(
          'tracing',
          startTracing(config.observability.tracing, { metrics: metrics.process, logger, instanceId: config.replicaId }),
          (t) => t.close(TRACE_FLUSH_MS),
          (t) => void t.close(0),
        );
      const registry = new RunRegistry(config.run.maxDetachedRuns);
      const owner = own(
        'owner client',
        new OwnerClient({
          ownerUrl: config.owner.url,
          relayUrl: config.owner.relayUrl,
          secret: config.owner.secret,
          preauthTimeoutMs: config.owner.preauthTimeoutMs,
          relayTimeoutMs: config.owner.relayTimeoutMs,
          connections: config.owner.connections,
          callbackAttempts: config.owner.callbackAttempts,
          callbackTimeoutMs: config.owner.callbackTimeoutMs,
          callbackConcurrency: config.owner.callbackConcurrency,
          jwtRefreshMs: config.owner.jwtRefreshMs,
          tracing,
          metrics: metrics.owner,
        }),
        (o) => o.close(),
        (o) => o.destroy(),
      );
      const channels = own('channel pool', new ChannelPool(config.workflow), (c) => c.close());
      const backend = own(
        'coordination backend',
        // Every lease is renewed as soon as Redis is back (LeaseKeeper.renewAll).
        connectBackend(config, metrics.coordination, logger, () => leases?.renewAll()),
        (b) => b.close(),
        (b) => b.destroy(),
      );
      const mcp = own(
        'mcp connector',
        new McpConnector({
          ownerUrl: config.owner.url,
          secret: config.owner.secret,
          jwtRefreshMs: config.owner.jwtRefreshMs,
          callTimeoutMs: config.mcp.callTimeoutMs,
          allowPrivate: config.mcp.allowPrivate,
          metrics: metrics.mcp,
          logger,
          tracing,
        }),
        (m) => m.close(),
      );
      if (backend instanceof RedisBackend) metrics.coordination.store.watch(backend);
      // Serve anyway when Redis is down at start: detached executes answer 503 until it heals.
      if (backend instanceof RedisBackend && !(await backend.waitReady(REDIS_STARTUP_WAIT_MS))) {
        logger.warn({ redis: backend.display }, 'redis not reachable at start; detached executes answer 503 LOCK_UNAVAILABLE until it is');
      }
      // One timer and one batched renewal a tick for every run's lease; releases batched too.
      leases = own(
        'lease keeper',
        new LeaseKeeper(backend, {
          ttlMs: config.coordination.leaseTtlMs,
          onBatch: (op, count, seconds) => metrics.coordination.leaseBatch(op, count, seconds),
          onLate: () => metrics.coordination.lateRenewals.inc(),
        }),
        (k) => k.close(),
      );
      const stopWatcher = own('stop watcher', new StopWatcher(backend, config.coordination.stopPollMs), (w) => w.close());
      const callbackBudget = new AbortController();
      // Every callback in flight (at most callbackConcurrency, each request or retry wait
      // with one abort listener) and the waiting line (one) listen to this signal: more than
      // Node's default of 10 is the design, not a leak, and would be warned about on every
      // drain. Past this bound the warning still means what it says.
      setMaxListeners(config.owner.callbackConcurrency + 1, callbackBudget.signal);
      const stopReasons = new StopReasons(config.run.workflowInfraStopReasons);
      // Said once: an operator reading why a run limit sent WORKHORSE_SERVER_SHUTDOWN finds it here.
      logger.info({ service_allowlist: config.run.workflowInfraStopReasons, ...stopReasons.infraWords }, 'stop words in force (LONGRUN_WORKFLOW_INFRA_STOP_REASONS)');
      // The lease keeper gives a renewal up after TTL/6 (lease-keeper.ts): a Redis command allowed longer is given up before its own deadline.
      if (config.redis.target && config.redis.commandTimeoutMs >= config.coordination.leaseTtlMs / 6) {
        logger.warn(
          { redis_command_timeout_ms: config.redis.commandTimeoutMs, lease_ttl_ms: config.coordination.leaseTtlMs },
          'LONGRUN_REDIS_COMMAND_TIMEOUT_MS is not under LONGRUN_LEASE_TTL_MS / 6: the lease keeper gives a renewal up before Redis would time it out, and sends it again meanwhile (docs/configuration.md)',
        );
      }
      const runLimits = own('run limits', new RunLimits(config.run.runLimitMs), (l) => l.close());
      const isDraining = (): boolean => gateway?.state !== 'serving';
      const follow = own(
        'follow',
        new Follow({
          log: followLogOf(config, logger),
          registry,
          backend,
          metrics: metrics.follow,
          replicaId: config.replicaId,
          settings: config.follow,
        }),
        (w) => w.close(),
      );
      const launcher = new Launcher(config.run, {
        coordination: { backend, leases, stopWatcher, metrics: metrics.coordination, leaseTtlMs: config.coordination.leaseTtlMs },
        channels,
        mcp,
        mcpDiscoveryTimeoutMs: config.mcp.discoveryTimeoutMs,
        isDraining,
        owner,
        metrics: metrics.run,
        logger,
        registry,
        replicaId: config.replicaId,
        runLimits,
        stopReasons,
        callbackSignal: callbackBudget.signal,
        follow,
        tracing,
      });
      const mainListener = createMainListener({
        launcher,
        owner,
        metrics: metrics.run,
        logger,
        keepaliveMs: config.http.keepaliveMs,
        secret: config.owner.secret,
        backend,
        stopKeyTtlMs: config.coordination.stopKeyTtlMs,
        sandboxRoutes: options.sandboxRoutes,
        routes: [websocketHttpRoutes(logger), followRoutes({ follow, owner, checkServing: () => launcher.checkServing(), logger })],
        tracing,
      });
      const parked: ParkedRuns = new Map();
      const bridges =
        config.redis.target && config.websocket.resumeWindowMs > 0
          ? own('bridges', connectBridges(config, backend, parked, metrics.websocket, logger), (b) => b.close())
          : undefined;
      const websockets = new WebSocketRoute({
        launcher,
        owner,
        metrics: metrics.websocket,
        logger,
        tracing,
        settings: {
          pingMs: config.websocket.pingMs,
          pongTimeoutMs: config.websocket.pongTimeoutMs,
          writeTimeoutMs: config.websocket.writeTimeoutMs,
          closeTimeoutMs: config.websocket.closeTimeoutMs,
          startTimeoutMs: config.websocket.startTimeoutMs,
          resumeWindowMs: config.websocket.resumeWindowMs,
          backlogBytes: config.websocket.backlogBytes,
          backlogBudget: new BacklogBudget(config.websocket.backlogBudgetBytes),
        },
        maxSessions: config.websocket.maxSessions,
        allowedOrigins: config.websocket.allowedOrigins,
        trustForwardedHost: config.websocket.trustForwardedHost,
        parked,
        bridges,
      });
      const mainServer = own('main listener', await listen(mainListener, config.http.listen), closeServer, (server) => server.closeAllConnections());
      mainServer.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => websockets.handleUpgrade(req, socket, head));
      // Long runs: no request or header timeouts on streaming responses.
      mainServer.requestTimeout = 0;
      mainServer.headersTimeout = 60_000;
      mainServer.keepAliveTimeout = 5_000;
      const opsServer = own(
        'ops listener',
        await listen(createOpsApp({ metrics: metrics.process, registry, isDraining, followersOf: (id) => follow.followersOf(id) }), config.http.opsListen),
        closeServer,
        (server) => server.closeAllConnections(),
      );
      // Closed first (the list closes last-in first): callbacks stop waiting, runs still in
      // flight are cancelled — a listener waits for its open blocking streams to end, and
      // a run's teardown needs the backend and the owner client, closed after.
      own('runs in flight', registry, (r) => r.cancelAll());
      // An upgraded socket is no longer the listener's to close.
      own('websocket sessions', websockets, (w) => w.terminateAll());
      // Before the main listener's close, which waits for its open responses: a follow stream never ends by itself.
      own('follow streams', follow, (w) => w.endAll('closing'));
      own('callback budget', callbackBudget, (c) => c.abort());
      gateway = new Gateway(
        {
          config,
          logger,
          metrics,
          registry,
          owner,
          channels,
          backend,
          leases,
          stopWatcher,
          launcher,
          stopReasons,
          mainServer,
          opsServer,
          websockets,
          follow,
          callbackBudget,
          tracing,
        },
        closables,
      );
    } catch (err) {
      await closeAll(closables, CLOSE_TIMEOUT_MS);
      throw err;
    }
    // The Redis URL is shown with its credentials masked (describeRedisTarget).
    const redis = gateway.backend instanceof RedisBackend ? gateway.backend.display : undefined;
    logger.info({ listen: gateway.mainUrl, ops: gateway.opsUrl, lock: gateway.backend.kind, redis, replica: config.replicaId }, 'longrun listening');
    return gateway;
  }

  get mainUrl(): string {
    return urlOf(this.parts.mainServer);
  }

  get opsUrl(): string {
    return urlOf(this.parts.opsServer);
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
      return closeAll(this.closables, timeoutMs);
    })();
    return this.closing;
  }
}
