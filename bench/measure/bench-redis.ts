/**
 * The redis-server every scenario of a bench run shares (stack/redis-server.ts starts it, for
 * the whole run), and what the scenarios read of it: its commands, CPU and bytes (INFO), its
 * keys (SCAN). Keyspace notifications for string keys are on, as an operator who wants a stop
 * key set directly to be seen at once configures them (longrun does not CONFIG SET them by default).
 */
import { Redis } from 'ioredis';
import { markStore, startRedis, type RedisServer } from '../../stack/redis-server';

export interface BenchRedis {
  readonly url: string;
  readonly pid: number;
  readonly client: Redis;
  /** Deletes every key (between scenarios), and marks the store new again. */
  flush(): Promise<void>;
  /** Counts keys matching `pattern` with SCAN (never KEYS). */
  count(pattern: string): Promise<number>;
  /** Commands the server has run so far, by name (INFO commandstats; commands run by scripts included). */
  commands(): Promise<Record<string, number>>;
  /** CPU the server has used so far, user + system, in ms (INFO cpu: microsecond resolution). */
  cpuMs(): Promise<number>;
  /**
   * Bytes the server has read from and written to its clients so far (INFO stats
   * total_net_input_bytes, total_net_output_bytes), less this call's own INFO stats traffic:
   * a phase read between two calls counts what its clients sent and were sent, as long as
   * no other INFO is asked between them.
   */
  netBytes(): Promise<{ input: number; output: number }>;
  stop(): Promise<void>;
}

/** `INFO stats` as ioredis sends it: `*2\r\n$4\r\ninfo\r\n$5\r\nstats\r\n` (RESP2). */
const INFO_STATS_COMMAND_BYTES = 25;

/** Starts it (marked as a new store, as `longrun store mark` does) with a client on it. */
export async function startBenchRedis(): Promise<BenchRedis> {
  const server: RedisServer = await startRedis({ args: ['--notify-keyspace-events', 'K$'] });
  // The retry strategy keeps reconnecting quickly should the server be slow to answer.
  const client = new Redis(server.url, { retryStrategy: () => 50, maxRetriesPerRequest: null });
  client.on('error', () => undefined);
  let ownInput = 0;
  let ownOutput = 0;
  return {
    url: server.url,
    get pid() {
      return server.pid ?? -1;
    },
    client,
    flush: async () => {
      await client.flushall();
      // Emptied by us, with no gateway on it: marked again as new, or the next scenario's locks
      // wait out the store fence (a flushed store without its marker lost its data).
      await markStore(server.url);
    },
    count: async (pattern) => {
      let cursor = '0';
      let n = 0;
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1_000);
        cursor = next;
        n += keys.length;
      } while (cursor !== '0');
      return n;
    },
    commands: async () => {
      const out: Record<string, number> = {};
      for (const match of (await client.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[match[1] as string] = Number(match[2]);
      return out;
    },
    cpuMs: async () => {
      const info = await client.info('cpu');
      const field = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
      return (field('used_cpu_user') + field('used_cpu_sys')) * 1_000;
    },
    netBytes: async () => {
      const info = await client.info('stats');
      const field = (name: string): number => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? Number.NaN);
      // The command was read before the counters were taken; the reply is written after, so the next reading counts it.
      ownInput += INFO_STATS_COMMAND_BYTES;
      const read = { input: field('total_net_input_bytes') - ownInput, output: field('total_net_output_bytes') - ownOutput };
      const replyBytes = Buffer.byteLength(info);
      ownOutput += replyBytes + `$${replyBytes}\r\n\r\n`.length;
      return read;
    },
    stop: async () => {
      client.disconnect();
      await server.stop();
    },
  };
}

/** Per-name differences between two command counts, and their total (what a phase cost Redis). */
export function commandDelta(before: Record<string, number>, after: Record<string, number>): { total: number; byName: Record<string, number> } {
  const byName: Record<string, number> = {};
  let total = 0;
  for (const [name, calls] of Object.entries(after)) {
    const n = calls - (before[name] ?? 0);
    if (n <= 0 || name === 'info') continue;
    byName[name] = n;
    total += n;
  }
  return { total, byName };
}
