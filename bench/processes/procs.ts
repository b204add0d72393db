/**
 * Process plumbing shared by the scenarios: free loopback ports, a process's resident
 * memory read from /proc, polling with a deadline, and the redis-server every scenario
 * runs against (spawned here, nothing persisted, killed at the end).
 */
import { markNewStore } from '../../src/coordination/store-mark';
import { parseRedisUrl } from '../../src/redis/url';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';

export const HOST = '127.0.0.1';

/**
 * The allocator settings the image runs the gateway with (the Dockerfile's runtime ENV;
 * test/process/deploy-image.test.ts keeps the two equal). The gateway and the raw-stream holder
 * both get them, so memory per run compares the same allocator.
 */
export const DEPLOYED_ALLOCATOR_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' };

/**
 * The node flags the image runs the gateway with (the Dockerfile's CMD; deploy-image.test.ts
 * keeps the two equal), given to the gateway and the raw holders alike. Node 24's V8 grows
 * its young generation to 3 × 64 MiB semi-spaces (Node 20's stopped at 3 × 16): after a
 * burst that space stays resident, 26.6 KB per held run at 5 000 runs where Node 20 had
 * 6.5. 16 MiB gives Node 24 exactly Node 20's young generation and scavenge rate, at no
 * measurable CPU cost (BENCHMARKS.md, Node 20 and Node 24).
 */
export const DEPLOYED_NODE_ARGS: readonly string[] = ['--max-semi-space-size=16'];

/** A loopback port that was free a moment ago (bound on 0, read, closed). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const { port } = server.address() as AddressInfo;
      server.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

/** Resident set size of a process in bytes (VmRSS of /proc/<pid>/status). */
export function readRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  if (!match) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]) * 1024;
}

/** CPU time (user + system) a process has used so far, in ms (/proc/<pid>/stat, 10 ms ticks). */
export function readCpuMs(pid: number, thread?: number): number {
  const stat = readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at state, field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return ticks * 10;
}

/**
 * CPU used by each named process between start() and read(): where a phase's CPU went
 * (on two cores, every process's share is a share the gateway did not get). A process
 * that exits meanwhile keeps the last value sampled (every 50 ms) before it went.
 */
export class CpuMeter {
  private readonly before = new Map<string, number>();
  private readonly latest = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly pids: Record<string, number>) {}

  start(): this {
    this.sample();
    for (const [name, value] of this.latest) this.before.set(name, value);
    this.timer = setInterval(() => this.sample(), 50);
    this.timer.unref();
    return this;
  }

  private sample(): void {
    for (const [name, pid] of Object.entries(this.pids)) {
      const value = safeCpu(pid);
      if (!Number.isNaN(value)) this.latest.set(name, value);
    }
  }

  /** CPU ms per process since start(), divided by `per` (e.g. per request); stops sampling. */
  read(per = 1): Record<string, number> {
    clearInterval(this.timer);
    this.sample();
    const out: Record<string, number> = {};
    for (const name of Object.keys(this.pids)) {
      const used = (this.latest.get(name) ?? Number.NaN) - (this.before.get(name) ?? Number.NaN);
      out[name] = Math.round((used / per) * 100) / 100;
    }
    return out;
  }
}

function safeCpu(pid: number): number {
  try {
    return readCpuMs(pid);
  } catch {
    return Number.NaN;
  }
}

/** Polls `check` every `everyMs` until it returns true; throws after timeoutMs naming `what`. */
export async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string, everyMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** `promise`, or a rejection naming `what` after timeoutMs (the timer never outlives it). */
export async function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string | (() => string)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
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

/** Resolves with the exit code (or signal name) of a child, already exited or not. */
export function exitOf(child: ChildProcess): Promise<number | string> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode ?? child.signalCode ?? -1);
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
}

/** Keeps the last `limit` characters a child wrote, for error messages. */
export function tailOutput(child: ChildProcess, limit = 8_192): () => string {
  let text = '';
  const keep = (chunk: Buffer): void => {
    text = (text + chunk.toString('utf8')).slice(-limit);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return () => text;
}

export interface RedisServer {
  url: string;
  pid: number;
  client: Redis;
  /** Deletes every key (between scenarios). */
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

/**
 * Spawns `redis-server` on a free loopback port, nothing persisted; resolves once it answers.
 * Keyspace notifications for string keys are on, as an operator who wants a stop key set
 * directly to be seen at once configures them (longrun does not CONFIG SET them by default).
 */
export async function startRedis(): Promise<RedisServer> {
  const port = await freePort();
  const args = ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--protected-mode', 'no', '--notify-keyspace-events', 'K$'];
  const child = spawn('redis-server', args, {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = tailOutput(child);
  const failed = new Promise<never>((_resolve, reject) => {
    child.once('error', (err) => reject(new Error(`cannot start redis-server (is it installed?): ${err.message}`)));
    child.once('exit', (code) => reject(new Error(`redis-server exited (${code}): ${output()}`)));
  });
  failed.catch(() => undefined);
  const url = `redis://${HOST}:${port}`;
  // Commands queue until the server is up; the retry strategy keeps reconnecting quickly.
  const client = new Redis(url, { retryStrategy: () => 50, maxRetriesPerRequest: null });
  client.on('error', () => undefined);
  await withTimeout(Promise.race([client.ping(), failed]), 10_000, () => `redis-server to answer: ${output()}`);
  // Just made, so known to be new: marked as `longrun store mark` does, so the gateways' first
  // locks need not wait until it is one lease TTL old (the store fence).
  const mark = async (): Promise<void> => {
    const marked = await markNewStore(parseRedisUrl(url));
    if (marked.outcome !== 'marked') throw new Error(`could not mark the benchmark's redis-server as a new store: ${JSON.stringify(marked.primaries)}`);
  };
  await mark();
  let ownInput = 0;
  let ownOutput = 0;
  return {
    url,
    pid: child.pid ?? -1,
    client,
    flush: async () => {
      await client.flushall();
      // Emptied by us, with no gateway on it: marked again as new, or the next scenario's locks
      // wait out the store fence (a flushed store without its marker lost its data).
      await mark();
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
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exitOf(child);
      }
    },
  };
}
