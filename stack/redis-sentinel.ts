/**
 * Redis as operators run it (docs/spec.md §5): a primary, a replica and three Sentinels, each a
 * real redis-server on a free loopback port in its own temporary folder, with failover
 * settings fast enough for a test (down after 1 s, failover timeout 3 s). Everything is
 * stopped by pid in `stop()` (and killed if the test worker exits without it).
 */
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, HOST } from './ports';
import { startRedis, type RedisServer } from './redis-server';

export interface SentinelTopologyOptions {
  /** The monitored master's name (default `longrun-test`). */
  masterName?: string;
  /** The data nodes' password (`requirepass`, `masterauth`; the Sentinels' `auth-pass`). */
  password?: string;
  /** The Sentinels' own password (`requirepass`; `sentinel-pass` between them). */
  sentinelPassword?: string;
  /**
   * TLS: every process also listens on a TLS port with this self-signed certificate (its
   * own CA). Sentinels monitor and replicas replicate over TLS, so the addresses Sentinel
   * hands out are TLS ports, and `url` is `rediss+sentinel://` to the Sentinels' TLS ports.
   * The plain ports stay, for the helper's own clients.
   */
  tls?: { certFile: string; keyFile: string };
}

export interface SentinelTopology {
  readonly masterName: string;
  /** The data nodes: [0] started as the primary, [1] as its replica (ports: their plain ones). */
  readonly nodes: readonly RedisServer[];
  readonly sentinels: readonly RedisServer[];
  /** `redis+sentinel://[:password@]127.0.0.1:a,127.0.0.1:b,127.0.0.1:c/<name>[?sentinel_password=…]` */
  readonly url: string;
  /** The primary's port as every Sentinel reports it (its TLS port with `tls`), or undefined while they disagree. */
  primaryPort(): Promise<number | undefined>;
  /** The data node Sentinel calls the primary now. */
  primary(): Promise<RedisServer>;
  /**
   * Resolves with the new primary's port once every Sentinel names a node other than
   * `oldPort` and that node answers `role: master`; rejects after timeoutMs.
   */
  waitForNewPrimary(oldPort: number, timeoutMs: number): Promise<number>;
  /** `SENTINEL FAILOVER <name>` on the first Sentinel. */
  failover(): Promise<void>;
  /** A client straight to the data node Sentinel reports at `port` (not through Sentinel), closed by stop(). */
  node(port: number): Redis;
  /** Stops every process (SIGTERM, SIGKILL after 2 s) and removes their folders. Idempotent. */
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 15_000;

function pairs(reply: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!Array.isArray(reply)) return out;
  for (let i = 0; i + 1 < reply.length; i += 2) out[String(reply[i])] = String(reply[i + 1]);
  return out;
}

function sentinelConfig(name: string, primaryPort: number, options: SentinelTopologyOptions): string {
  return [
    `sentinel monitor ${name} ${HOST} ${primaryPort} 2`,
    // Fast enough for a test: a silent primary is subjectively down after 1 s.
    `sentinel down-after-milliseconds ${name} 1000`,
    `sentinel failover-timeout ${name} 3000`,
    `sentinel parallel-syncs ${name} 1`,
    ...(options.password !== undefined ? [`sentinel auth-pass ${name} ${options.password}`] : []),
    ...(options.sentinelPassword !== undefined ? [`sentinel sentinel-pass ${options.sentinelPassword}`] : []),
    '',
  ].join('\n');
}

/** Starts the five processes and resolves once all three Sentinels know the replica and each other. */
export async function startSentinelTopology(options: SentinelTopologyOptions = {}): Promise<SentinelTopology> {
  const masterName = options.masterName ?? 'longrun-test';
  const started: RedisServer[] = [];
  const clients = new Map<string, Redis>();
  const client = (port: number, password: string | undefined): Redis => {
    const key = `${port}`;
    let redis = clients.get(key);
    if (!redis) {
      redis = new Redis({ host: HOST, port, password, maxRetriesPerRequest: 1, connectTimeout: 1_000, retryStrategy: () => 100 });
      redis.on('error', () => undefined);
      clients.set(key, redis);
    }
    return redis;
  };
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      for (const redis of clients.values()) redis.disconnect();
      await Promise.allSettled(started.map((s) => s.stop()));
    })());

  // With TLS, the port each process is known by to Sentinel and to longrun.
  const announced = new Map<RedisServer, number>();
  const port = (server: RedisServer): number => announced.get(server) ?? server.port;
  const start = async (redisOptions: Parameters<typeof startRedis>[0]): Promise<RedisServer> => {
    const { tls } = options;
    const tlsPort = tls ? await freePort(HOST) : undefined;
    const tlsArgs = tls
      ? [
          '--tls-port',
          String(tlsPort),
          '--tls-cert-file',
          tls.certFile,
          '--tls-key-file',
          tls.keyFile,
          '--tls-ca-cert-file',
          tls.certFile,
          '--tls-auth-clients',
          'no',
          '--tls-replication',
          'yes',
        ]
      : [];
    const server = await startRedis({ ...redisOptions, args: [...(redisOptions?.args ?? []), ...tlsArgs] });
    started.push(server);
    if (tlsPort !== undefined) announced.set(server, tlsPort);
    return server;
  };

  try {
    // The replica's first sync streams at once (Redis waits 5 s for more replicas by default).
    const dataArgs = ['--repl-diskless-sync-delay', '0', ...(options.password !== undefined ? ['--masterauth', options.password] : [])];
    const primary = await start({ password: options.password, args: dataArgs });
    const replica = await start({ password: options.password, args: [...dataArgs, '--replicaof', HOST, String(port(primary))] });
    const sentinels = await Promise.all(
      [0, 1, 2].map(() => start({ sentinel: true, config: sentinelConfig(masterName, port(primary), options), password: options.sentinelPassword })),
    );
    const nodes = [primary, replica];
    const byAnnouncedPort = (p: number | undefined): RedisServer | undefined => nodes.find((n) => port(n) === p);
    // ioredis types have no sentinel(); call() sends it as it is.
    const sentinel = (s: RedisServer, ...args: string[]): Promise<unknown> => client(s.port, options.sentinelPassword).call('SENTINEL', ...args);
    const nodeClient = (reported: number): Redis => client(byAnnouncedPort(reported)?.port ?? reported, options.password);

    const topology: SentinelTopology = {
      masterName,
      nodes,
      sentinels,
      url:
        `${options.tls ? 'rediss' : 'redis'}+sentinel://${options.password !== undefined ? `:${encodeURIComponent(options.password)}@` : ''}` +
        `${sentinels.map((s) => `${HOST}:${port(s)}`).join(',')}/${masterName}` +
        (options.sentinelPassword !== undefined ? `?sentinel_password=${encodeURIComponent(options.sentinelPassword)}` : ''),
      async primaryPort() {
        const answers = await Promise.all(
          sentinels.map((s) =>
            sentinel(s, 'get-master-addr-by-name', masterName).then(
              (a) => (Array.isArray(a) ? Number(a[1]) : undefined),
              () => undefined,
            ),
          ),
        );
        const first = answers[0];
        return first !== undefined && answers.every((a) => a === first) ? first : undefined;
      },
      async primary() {
        const reported = await topology.primaryPort();
        const node = byAnnouncedPort(reported);
        if (!node) throw new Error(`the Sentinels do not agree on a primary (${String(reported)})`);
        return node;
      },
      async waitForNewPrimary(oldPort, timeoutMs) {
        const deadline = Date.now() + timeoutMs;
        while (Date.now() < deadline) {
          const reported = await topology.primaryPort();
          if (reported !== undefined && reported !== oldPort) {
            const role = await nodeClient(reported)
              .role()
              .catch(() => undefined);
            if (Array.isArray(role) && role[0] === 'master') return reported;
          }
          await sleep(50);
        }
        throw new Error(`no new primary within ${timeoutMs} ms (the Sentinels say ${String(await topology.primaryPort())})`);
      },
      async failover() {
        await sentinel(sentinels[0] as RedisServer, 'failover', masterName);
      },
      node: nodeClient,
      stop,
    };

    // Ready: every Sentinel sees the replica with a live link and the two other Sentinels
    // (a failover needs the quorum and a majority to elect a leader).
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      const states = await Promise.all(
        sentinels.map(async (s) => {
          const master = pairs(await sentinel(s, 'master', masterName).catch(() => undefined));
          const replicas = await sentinel(s, 'replicas', masterName).catch(() => []);
          const first = pairs(Array.isArray(replicas) ? replicas[0] : undefined);
          return master['num-other-sentinels'] === '2' && first['flags'] === 'slave' && first['master-link-status'] === 'ok';
        }),
      );
      if (states.every(Boolean)) return topology;
      if (Date.now() > deadline) throw new Error(`the Sentinel topology was not ready within ${READY_TIMEOUT_MS} ms`);
      await sleep(100);
    }
  } catch (err) {
    await stop();
    throw err;
  }
}
