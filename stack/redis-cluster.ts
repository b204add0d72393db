/**
 * A real Redis Cluster on loopback: three primaries and a replica of each, every node a
 * redis-server child (`--cluster-enabled yes`) on a free port with its own temporary
 * folder, the slots assigned by `redis-cli --cluster create … --cluster-replicas 1`.
 * The cluster bus port of each node is picked free too (`--cluster-port`), and node
 * timeouts are short (2 s) so a failover fits in a test. Everything is stopped by pid
 * in `stop()` (and killed if the test worker exits without it).
 */
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { freePort, HOST } from './ports';
import { markStore, startRedis, type RedisServer } from './redis-server';

const READY_TIMEOUT_MS = 20_000;

/** One line of CLUSTER NODES. */
export interface ClusterNode {
  id: string;
  port: number;
  role: 'master' | 'slave';
  /** The primary's id, for a replica. */
  primaryId: string | undefined;
  /** Slot ranges [from, to] served, for a primary. */
  slots: Array<[number, number]>;
  failed: boolean;
}

export interface RedisClusterTopology {
  readonly nodes: readonly RedisServer[];
  /** `redis://127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>`: seed nodes, as LONGRUN_REDIS_URL gives them. */
  readonly url: string;
  /** CLUSTER NODES as `port` sees it (by default, the first node that answers). */
  clusterNodes(port?: number): Promise<ClusterNode[]>;
  /** The port of the primary serving `slot`, as the first node that answers sees it. */
  primaryOf(slot: number): Promise<number>;
  /** CLUSTER KEYSLOT of a key, asked of a node. */
  keyslot(key: string): Promise<number>;
  /**
   * `CLUSTER FAILOVER` on the replica of the primary at `primaryPort` (a manual failover:
   * the replica catches up first, so nothing acknowledged is lost); resolves with the new
   * primary's port once every node sees it as the primary of those slots.
   */
  failover(primaryPort: number, timeoutMs: number): Promise<number>;
  /**
   * SIGKILLs the primary at `primaryPort` (a crash: its replica takes over after the
   * cluster's node timeout, with whatever it had replicated); resolves with the new
   * primary's port once every surviving node sees it as the primary of those slots.
   */
  killPrimary(primaryPort: number, timeoutMs: number): Promise<number>;
  /** A client straight to one node (not cluster-aware), closed by stop(). */
  node(port: number): Redis;
  /** A cluster-aware client (for keys written as the owner would), closed by stop(). */
  client(): Cluster;
  /** Stops every node (SIGTERM, SIGKILL after 2 s) and removes their folders. Idempotent. */
  stop(): Promise<void>;
}

function parseNodes(text: string): ClusterNode[] {
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id, address, flags, primaryId, , , , , ...slots] = line.split(' ');
      const port = Number(/:(\d+)@/.exec(address ?? '')?.[1]);
      const flagList = (flags ?? '').split(',');
      return {
        id: id ?? '',
        port,
        role: flagList.includes('master') ? 'master' : 'slave',
        primaryId: primaryId === '-' ? undefined : primaryId,
        slots: slots
          .filter((s) => /^\d+(-\d+)?$/.test(s))
          .map((s) => {
            const [from, to] = s.split('-').map(Number);
            return [from as number, to ?? (from as number)];
          }),
        failed: flagList.some((f) => f === 'fail' || f === 'fail?'),
      } satisfies ClusterNode;
    });
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(output) : reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${output}`))));
  });
}

/** Starts six nodes, creates the cluster, and resolves once every node says it is ok. */
export async function startRedisCluster(): Promise<RedisClusterTopology> {
  const nodes: RedisServer[] = [];
  const direct = new Map<number, Redis>();
  const clusterClients: Cluster[] = [];
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      for (const c of clusterClients) c.disconnect();
      for (const r of direct.values()) r.disconnect();
      await Promise.allSettled(nodes.map((n) => n.stop()));
    })());
  const node = (port: number): Redis => {
    let redis = direct.get(port);
    if (!redis) {
      redis = new Redis({ host: HOST, port, maxRetriesPerRequest: 1, connectTimeout: 1_000, retryStrategy: () => 100 });
      redis.on('error', () => undefined);
      direct.set(port, redis);
    }
    return redis;
  };
  try {
    // The bus port is picked apart from the node's own: another process may take it before
    // the node binds it, so a node whose bus port was taken starts again with another.
    const startNode = async (): Promise<RedisServer> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await startRedis({
            args: [
              '--cluster-enabled',
              'yes',
              '--cluster-config-file',
              'nodes.conf',
              '--cluster-node-timeout',
              '2000',
              '--cluster-port',
              String(await freePort(HOST)),
              '--repl-diskless-sync-delay',
              '0',
            ],
          });
        } catch (err) {
          if (attempt >= 5 || !/address already in use/i.test((err as Error).message)) throw err;
        }
      }
    };
    for (const server of await Promise.all(Array.from({ length: 6 }, startNode))) nodes.push(server);
    await run('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `${HOST}:${n.port}`), '--cluster-replicas', '1', '--cluster-yes']);
    /** As `port` sees it; without a port, as the first node that answers sees it (one may have been killed). */
    const clusterNodes = async (port?: number): Promise<ClusterNode[]> => {
      if (port !== undefined) return parseNodes(String(await node(port).call('CLUSTER', 'NODES')));
      let lastError: unknown;
      for (const n of nodes) {
        try {
          return parseNodes(String(await node(n.port).call('CLUSTER', 'NODES')));
        } catch (err) {
          lastError = err;
        }
      }
      throw lastError;
    };
    const replicaOf = async (primaryPort: number): Promise<number> => {
      const seen = await clusterNodes(nodes.find((n) => n.port !== primaryPort)?.port);
      const primary = seen.find((n) => n.port === primaryPort && n.role === 'master');
      const replica = seen.find((n) => n.primaryId === primary?.id && !n.failed);
      if (!primary || !replica) throw new Error(`no replica of a primary on port ${primaryPort}`);
      return replica.port;
    };
    /** Waits until every node of `asked` sees `replica` as a primary and the old primary as `demoted` says. */
    const promoted = async (replica: number, primaryPort: number, asked: RedisServer[], timeoutMs: number, demoted: (view: ClusterNode[]) => boolean): Promise<void> => {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const views = await Promise.all(asked.map((n) => clusterNodes(n.port).catch(() => [])));
        if (views.every((view) => view.find((n) => n.port === replica)?.role === 'master' && demoted(view))) return;
        await sleep(50);
      }
      throw new Error(`the replica on port ${replica} was not every node's primary in place of ${primaryPort} within ${timeoutMs} ms`);
    };
    const topology: RedisClusterTopology = {
      nodes,
      url: '',
      clusterNodes,
      async primaryOf(slot) {
        const primary = (await clusterNodes()).find((n) => n.role === 'master' && n.slots.some(([from, to]) => slot >= from && slot <= to));
        if (!primary) throw new Error(`no primary serves slot ${slot}`);
        return primary.port;
      },
      async keyslot(key) {
        return Number(await node(nodes[0]?.port as number).call('CLUSTER', 'KEYSLOT', key));
      },
      async failover(primaryPort, timeoutMs) {
        const replica = await replicaOf(primaryPort);
        await node(replica).call('CLUSTER', 'FAILOVER');
        await promoted(replica, primaryPort, nodes, timeoutMs, (view) => view.find((n) => n.port === primaryPort)?.role === 'slave');
        return replica;
      },
      async killPrimary(primaryPort, timeoutMs) {
        const replica = await replicaOf(primaryPort);
        const killed = nodes.find((n) => n.port === primaryPort);
        await killed?.kill();
        const survivors = nodes.filter((n) => n !== killed);
        await promoted(replica, primaryPort, survivors, timeoutMs, (view) => view.find((n) => n.port === primaryPort)?.failed === true);
        return replica;
      },
      node,
      client() {
        const cluster = new Cluster([{ host: HOST, port: nodes[0]?.port as number }], { redisOptions: { maxRetriesPerRequest: 1 } });
        cluster.on('error', () => undefined);
        clusterClients.push(cluster);
        return cluster;
      },
      stop,
    };
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      const states = await Promise.all(
        nodes.map(async (n) => {
          const info = String(await node(n.port).call('CLUSTER', 'INFO'));
          const replication = await node(n.port).info('replication');
          return /cluster_state:ok/.test(info) && /cluster_known_nodes:6/.test(info) && (/role:master/.test(replication) || /master_link_status:up/.test(replication));
        }),
      );
      if (states.every(Boolean)) break;
      if (Date.now() > deadline) throw new Error(`the cluster was not ready within ${READY_TIMEOUT_MS} ms`);
      await sleep(100);
    }
    const primaries = (await clusterNodes()).filter((n) => n.role === 'master' && n.slots.length > 0);
    const url = `redis://${primaries.map((p) => `${HOST}:${p.port}`).join(',')}`;
    // Marked as a new store, as an operator would (`longrun store mark`): every primary, in its lowest slot.
    await markStore(url, { cluster: true });
    return { ...topology, url };
  } catch (err) {
    await stop();
    throw err;
  }
}
