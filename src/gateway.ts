/**
 * The gateway process's parts, assembled: owner client, channel pool, lock backend,
 * run registry, metrics, the main and ops listeners — and the drain that takes them down
 * (SPEC §7): readiness 503 at once, new executes 503 DRAINING, then after the shutdown
 * delay every run in flight is stopped with WORKHORSE_SERVER_SHUTDOWN, concurrently,
 * within the drain budget; then listeners and clients close.
 */
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config, ListenAddress } from './config';
import { createLogger, type Logger } from './log';
import { Metrics } from './metrics';
import type { CoordinationBackend } from './coordination/backend';
import { MemoryBackend } from './coordination/memory-backend';
import { RedisBackend } from './coordination/redis-backend';
import { StopWatcher } from './coordination/stop-watcher';
import { createMainApp } from './http/main-app';
import { createOpsApp } from './http/ops-app';
import { OwnerClient } from './owner/owner-client';
import { RunRegistry } from './run/registry';
import { SERVER_SHUTDOWN } from './run/stop-reasons';
import { ChannelPool } from './workflow/channel-pool';

export type GatewayState = 'serving' | 'draining' | 'closed';

export interface GatewayOptions {
  logger?: Logger;
  metrics?: Metrics;
}

function listen(app: http.RequestListener, address: ListenAddress): Promise<http.Server> {
  return new Promise((resolve, reject) => {
    const server = (app as unknown as { listen: (port: number, host: string) => http.Server }).listen(address.port, address.host);
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

export class Gateway {
  private state: GatewayState = 'serving';
  private draining: Promise<void> | undefined;
  private closing: Promise<void> | undefined;
  private constructor(
    readonly config: Config,
    readonly logger: Logger,
    readonly metrics: Metrics,
    readonly registry: RunRegistry,
    private readonly owner: OwnerClient,
    private readonly channels: ChannelPool,
    readonly backend: CoordinationBackend,
    private readonly stopWatcher: StopWatcher,
    private readonly mainServer: http.Server,
    private readonly opsServer: http.Server,
    private readonly callbackBudget: AbortController,
  ) {}

  /** Starts both listeners. Throws when a listener cannot bind. */
  static async start(config: Config, options: GatewayOptions = {}): Promise<Gateway> {
    if (!config.ownerUrl || !config.secret) throw new Error('gateway needs an owner URL and a secret (or the sandbox)');
    const logger = options.logger ?? createLogger(config.logLevel);
    const metrics = options.metrics ?? new Metrics();
    const registry = new RunRegistry(config.maxDetachedRuns);
    const owner = new OwnerClient({
      ownerUrl: config.ownerUrl,
      secret: config.secret,
      preauthTimeoutMs: config.preauthTimeoutMs,
      relayTimeoutMs: config.relayTimeoutMs,
    });
    const channels = new ChannelPool({ streamsPerConnection: config.grpcStreamsPerConnection });
    let backend: CoordinationBackend;
    let redisDisplay: string | undefined;
    if (config.redis) {
      const redis = new RedisBackend(config.redis, { configureNotifications: config.redisConfigureNotifications, logger });
      redisDisplay = redis.display;
      // Serve anyway when Redis is down at start: detached executes answer 503 until it heals.
      if (!(await redis.waitReady(5_000))) {
        logger.warn({ redis: redisDisplay }, 'redis not reachable at start; detached executes answer 503 LOCK_UNAVAILABLE until it is');
      }
      backend = redis;
    } else {
      backend = new MemoryBackend();
    }
    const stopWatcher = new StopWatcher(backend, config.stopPollMs);
    let gateway: Gateway | undefined;
    const isDraining = (): boolean => gateway?.state !== 'serving';
    const callbackSignal = new AbortController();
    const mainApp = createMainApp({
      config,
      secret: config.secret,
      owner,
      channels,
      backend,
      stopWatcher,
      registry,
      metrics,
      logger,
      isDraining,
      callbackSignal: callbackSignal.signal,
    });
    const opsApp = createOpsApp({ metrics, registry, isDraining });
    let mainServer: http.Server | undefined;
    let opsServer: http.Server | undefined;
    try {
      mainServer = await listen(mainApp, config.listen);
      opsServer = await listen(opsApp, config.opsListen);
    } catch (err) {
      if (mainServer) await closeServer(mainServer);
      await owner.close();
      channels.close();
      stopWatcher.close();
      await backend.close();
      throw err;
    }
    // Long turns: no request or header timeouts on streaming responses.
    mainServer.requestTimeout = 0;
    mainServer.headersTimeout = 60_000;
    mainServer.keepAliveTimeout = 5_000;
    gateway = new Gateway(config, logger, metrics, registry, owner, channels, backend, stopWatcher, mainServer, opsServer, callbackSignal);
    // The Redis URL is shown with its credentials masked (describeRedisTarget).
    logger.info({ listen: gateway.mainUrl, ops: gateway.opsUrl, lock: backend.kind, redis: redisDisplay, replica: config.replicaId }, 'longrun listening');
    return gateway;
  }

  get mainUrl(): string {
    return urlOf(this.mainServer);
  }

  get opsUrl(): string {
    return urlOf(this.opsServer);
  }

  /**
   * Drains and closes (SIGTERM). Idempotent. Every run in flight is stopped with
   * WORKHORSE_SERVER_SHUTDOWN within the drain budget; locks are released; segment-end
   * callbacks are sent while the budget lasts.
   */
  drain(): Promise<void> {
    this.draining ??= (async () => {
      if (this.state === 'serving') this.state = 'draining';
      this.metrics.draining.set(1);
      const started = Date.now();
      this.logger.info({ runs: this.registry.size }, 'drain started');
      if (this.config.shutdownDelayMs > 0) await sleep(this.config.shutdownDelayMs);
      const budgetMs = this.config.drainTimeoutMs;
      // Leave part of the budget for lock release and segment-end callbacks after the stops.
      const ackTimeoutMs = Math.min(this.config.stopAckTimeoutMs, Math.max(Math.floor(budgetMs / 2), budgetMs - 2_000));
      const callbackDeadline = setTimeout(() => this.callbackBudget.abort(), Math.max(0, budgetMs - 250));
      const stops = this.registry.stopAll(SERVER_SHUTDOWN, ackTimeoutMs);
      let budgetTimer: NodeJS.Timeout | undefined;
      const budget = new Promise<'over'>((resolve) => (budgetTimer = setTimeout(() => resolve('over'), budgetMs)));
      const outcome = await Promise.race([stops.then(() => 'done' as const), budget]);
      clearTimeout(budgetTimer);
      clearTimeout(callbackDeadline);
      this.logger.info({ drain_ms: Date.now() - started, outcome, runs_left: this.registry.size }, 'drain finished');
      await this.close();
    })();
    return this.draining;
  }

  /** Closes listeners and clients at once (runs still in flight are cancelled). Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.state = 'closed';
      this.callbackBudget.abort();
      this.registry.cancelAll();
      const steps = [
        closeServer(this.mainServer),
        closeServer(this.opsServer),
        this.owner.close(),
        Promise.resolve().then(() => this.channels.close()),
      ];
      await Promise.allSettled(steps);
      this.stopWatcher.close();
      await this.backend.close().catch(() => undefined);
    })();
    return this.closing;
  }
}
