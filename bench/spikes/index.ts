/**
 * Library spikes (issue [18]): what each library longrun uses costs in CPU per call, on
 * this machine, against a lean client doing the same wire work. Measurement only — the
 * product imports nothing from here. Results and how to read them: bench/spikes/RESULTS.md.
 *
 *   npm run build && node dist/bench/spikes/index.js [--pairs harness,http,redis,grpc,server]
 *       [--runs 2] [--open-s 10] [--rate 200] [--bursts 12] [--burst-size 200] [--gap-ms 50]
 *   node dist/bench/spikes/index.js --from-json bench/spikes/results.json   (prints a saved report's tables)
 *
 * Pairs (each variant's client and server in processes of their own, loopback only):
 *
 *  - harness  the load generator alone (a call that does nothing): its share of every number
 *  - http     POST ~500-byte JSON, JSON answer, keep-alive, against a node:http server:
 *             undici Pool.request (as OwnerClient) · undici Pool.dispatch · node:http Agent ·
 *             a raw HTTP/1.1 client on net.Socket
 *  - redis    EVALSHA of SET NX PX + return against a real redis-server:
 *             ioredis with auto-pipelining (longrun's createRedis) · a raw RESP client
 *  - grpc     ExecuteWorkflow bidi call (open, write startRequest, read one action,
 *             half-close, read the end) against a grpc-js server, one HTTP/2 connection:
 *             @grpc/grpc-js (longrun's channel options) · raw node:http2
 *  - server   the execute route's HTTP work, the SERVER's CPU measured (the client is
 *             undici in its own process): node:http bare handler · express 5 with
 *             longrun's two middlewares and res.status(202).json
 *
 * Each variant runs in a fresh client process that connects and warms up (3 bursts of
 * 200, 0.5 s at 400/s), then runs two shapes, CPU measured with process.cpuUsage() in the
 * measured process: (a) open loop at --rate calls/s for --open-s seconds; (b) --bursts
 * bursts of --burst-size calls issued at once, each awaited, --gap-ms apart. Variants
 * alternate (A, B, A, B) --runs times, so drift on this shared 2-core VM hits them alike.
 * Prints the tables and writes JSON to bench/out/spikes.json.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { IpcChild } from '../processes/ipc';
import { startRedis, type RedisServer } from '../processes/procs';
import { median, round } from '../measure/stats';
import type { ClientQueries } from './client-process';
import { syscallCounts, type ShapeResult, type ShapeSpec } from './load';
import type { ServerQueries } from './server-process';

interface VariantSpec {
  label: string;
  client: string;
  /** A server-process.ts role, 'redis' (the pair's redis-server), or null (no server). */
  server: string | null;
}

interface PairSpec {
  name: string;
  /** Whose CPU per call is the pair's headline. */
  measured: 'client' | 'server';
  variants: VariantSpec[];
  /** Runs of each variant, when not --runs. */
  runs?: number;
}

const pairs: PairSpec[] = [
  { name: 'harness', measured: 'client', runs: 1, variants: [{ label: 'noop (load harness alone)', client: 'noop', server: null }] },
  {
    name: 'http',
    measured: 'client',
    variants: [
      { label: 'undici Pool.request', client: 'undici-request', server: 'owner' },
      { label: 'undici Pool.dispatch', client: 'undici-dispatch', server: 'owner' },
      { label: 'node:http Agent', client: 'node-http', server: 'owner' },
      { label: 'raw net.Socket HTTP/1.1', client: 'raw-http', server: 'owner' },
    ],
  },
  {
    name: 'redis',
    measured: 'client',
    variants: [
      { label: 'ioredis (auto-pipelining)', client: 'ioredis', server: 'redis' },
      { label: 'raw RESP on net.Socket', client: 'raw-resp', server: 'redis' },
    ],
  },
  {
    name: 'grpc',
    measured: 'client',
    variants: [
      { label: '@grpc/grpc-js', client: 'grpc-js', server: 'grpc' },
      { label: 'raw node:http2', client: 'raw-h2', server: 'grpc' },
    ],
  },
  {
    name: 'server',
    measured: 'server',
    variants: [
      { label: 'express 5 (2 middlewares + route)', client: 'undici-execute', server: 'gateway-express' },
      { label: 'node:http bare handler', client: 'undici-execute', server: 'gateway-bare' },
    ],
  },
];

interface Measurement extends ShapeResult {
  pair: string;
  variant: string;
  run: number;
  /** The server's CPU per call over the same window (its process, or redis-server's INFO cpu). */
  serverCpuMsPerCall: number | null;
  /** The server's read/readv and write/writev syscalls per call over the same window. */
  serverReadsPerCall: number | null;
  serverWritesPerCall: number | null;
}

function cliOptions(argv: string[]): { selected: PairSpec[]; runs: number; open: ShapeSpec; burst: ShapeSpec; fromJson: string | undefined } {
  const { values } = parseArgs({
    args: argv,
    options: {
      pairs: { type: 'string' },
      runs: { type: 'string', default: '2' },
      'open-s': { type: 'string', default: '10' },
      rate: { type: 'string', default: '200' },
      bursts: { type: 'string', default: '12' },
      'burst-size': { type: 'string', default: '200' },
      'gap-ms': { type: 'string', default: '50' },
      'from-json': { type: 'string' },
    },
  });
  const num = (name: keyof typeof values): number => {
    const value = Number(values[name]);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number`);
    return value;
  };
  const names = values.pairs?.split(',') ?? pairs.map((p) => p.name);
  const selected = names.map((name) => {
    const pair = pairs.find((p) => p.name === name);
    if (!pair) throw new Error(`unknown pair ${name} (pairs: ${pairs.map((p) => p.name).join(', ')})`);
    return pair;
  });
  return {
    selected,
    fromJson: values['from-json'],
    runs: num('runs'),
    open: { shape: 'open', ratePerS: num('rate'), durationMs: num('open-s') * 1_000 },
    burst: { shape: 'burst', size: num('burst-size'), count: num('bursts'), gapMs: num('gap-ms') },
  };
}

/** Runs both shapes for one variant: a fresh server (unless shared) and a fresh client. */
async function measureVariant(pair: PairSpec, variant: VariantSpec, run: number, shapes: ShapeSpec[], redis: RedisServer | undefined): Promise<Measurement[]> {
  const started: Array<IpcChild<ClientQueries> | IpcChild<ServerQueries>> = [];
  try {
    let server: IpcChild<ServerQueries> | undefined;
    let target = '';
    if (variant.server === 'redis') target = redis?.url ?? '';
    else if (variant.server !== null) {
      server = await IpcChild.start<ServerQueries>(`server ${variant.server}`, 'spikes/server-process.js', { env: { SPIKE_SERVER: variant.server } });
      started.push(server);
      target = server.address;
    }
    const client = await IpcChild.start<ClientQueries>(`client ${variant.client}`, 'spikes/client-process.js', { env: { SPIKE_VARIANT: variant.client, SPIKE_TARGET: target } });
    started.push(client);
    const out: Measurement[] = [];
    for (const spec of shapes) {
      await server?.query('mark', null);
      const redisUsed = redis && variant.server === 'redis' ? { cpuMs: await redis.cpuMs(), io: syscallCounts(redis.pid) } : undefined;
      const result = await client.query('run', spec, 180_000);
      let used: { cpuMs: number; reads: number; writes: number } | undefined;
      if (server) {
        const window = await server.query('read', null);
        used = { cpuMs: window.userMs + window.sysMs, reads: window.reads, writes: window.writes };
      } else if (redis && redisUsed) {
        // Read after the CPU so that INFO's own reply is not among the syscalls counted.
        const io = syscallCounts(redis.pid);
        used = {
          cpuMs: (await redis.cpuMs()) - redisUsed.cpuMs,
          reads: (io?.reads ?? Number.NaN) - (redisUsed.io?.reads ?? Number.NaN),
          writes: (io?.writes ?? Number.NaN) - (redisUsed.io?.writes ?? Number.NaN),
        };
      }
      const per = (value: number | undefined, digits: number): number | null => (value === undefined ? null : round(value / result.calls, digits));
      out.push({
        ...result,
        pair: pair.name,
        variant: variant.label,
        run,
        serverCpuMsPerCall: per(used?.cpuMs, 4),
        serverReadsPerCall: per(used?.reads, 2),
        serverWritesPerCall: per(used?.writes, 2),
      });
    }
    return out;
  } finally {
    for (const child of started.reverse()) await child.stop();
  }
}

function fmt(value: number | null, digits = 3): string {
  return value === null || !Number.isFinite(value) ? '—' : value.toFixed(digits);
}

function detailTable(rows: Measurement[]): string {
  const lines = [
    '| pair | variant | run | shape | calls | errors | client CPU ms/call (user + sys) | client reads/writes per call | server CPU ms/call | server reads/writes per call | p50 ms | p99 ms | wall ms |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.pair} | ${r.variant} | ${r.run} | ${r.shape} | ${r.calls} | ${r.errors} | ${fmt(r.cpuMsPerCall)} (${fmt(r.userMsPerCall)} + ${fmt(r.sysMsPerCall)}) | ${fmt(r.readsPerCall, 2)} / ${fmt(r.writesPerCall, 2)} | ${fmt(r.serverCpuMsPerCall)} | ${fmt(r.serverReadsPerCall, 2)} / ${fmt(r.serverWritesPerCall, 2)} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${r.wallMs} |`,
    );
  }
  return lines.join('\n');
}

function mean(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}

/** One line per variant and shape: the measured side's CPU per call in each run and their mean, its syscalls (median of the runs), and the p50s. */
function summaryTable(rows: Measurement[]): string {
  const lines = ['| pair | variant | shape | measured | CPU ms/call, each run | mean | reads / writes per call (median) | p50 ms, each run |', '|---|---|---|---|---|---|---|---|'];
  const groups = new Map<string, Measurement[]>();
  for (const r of rows) {
    const key = `${r.pair}|${r.variant}|${r.shape}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  for (const group of groups.values()) {
    const first = group[0] as Measurement;
    const onServer = pairs.find((p) => p.name === first.pair)?.measured === 'server';
    const cpu = group.map((r) => (onServer ? r.serverCpuMsPerCall : r.cpuMsPerCall) ?? Number.NaN);
    const reads = median(group.map((r) => (onServer ? r.serverReadsPerCall : r.readsPerCall) ?? Number.NaN));
    const writes = median(group.map((r) => (onServer ? r.serverWritesPerCall : r.writesPerCall) ?? Number.NaN));
    lines.push(
      `| ${first.pair} | ${first.variant} | ${first.shape} | ${onServer ? 'server' : 'client'} | ${cpu.map((v) => fmt(v)).join(', ')} | ${fmt(mean(cpu))} | ${fmt(reads, 2)} / ${fmt(writes, 2)} | ${group.map((r) => fmt(r.p50Ms, 2)).join(', ')} |`,
    );
  }
  return lines.join('\n');
}

/** The redis-server of the pair being measured: killed on Ctrl-C too (the forked children exit with their IPC channel). */
let liveRedis: RedisServer | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void (liveRedis?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

async function main(): Promise<void> {
  const options = cliOptions(process.argv.slice(2));
  if (options.fromJson !== undefined) {
    const saved = JSON.parse(readFileSync(options.fromJson, 'utf8')) as { rows: Measurement[] };
    console.log(`${summaryTable(saved.rows)}\n\n${detailTable(saved.rows)}`);
    return;
  }
  const rows: Measurement[] = [];
  const startedAt = Date.now();
  for (const pair of options.selected) {
    const redis = pair.variants.some((v) => v.server === 'redis') ? await startRedis() : undefined;
    liveRedis = redis;
    try {
      const runs = pair.runs ?? options.runs;
      for (let run = 1; run <= runs; run++) {
        for (const variant of pair.variants) {
          const measured = await measureVariant(pair, variant, run, [options.open, options.burst], redis);
          for (const m of measured) {
            rows.push(m);
            console.log(
              `${pair.name.padEnd(8)} ${variant.label.padEnd(36)} run ${run} ${m.shape.padEnd(5)} client ${fmt(m.cpuMsPerCall)} ms/call  server ${fmt(m.serverCpuMsPerCall)}  p50 ${fmt(m.p50Ms, 2)} ms  errors ${m.errors}${m.firstError ? ` (${m.firstError})` : ''}`,
            );
          }
          await redis?.flush();
        }
      }
    } finally {
      await redis?.stop();
      liveRedis = undefined;
    }
  }
  const elapsedS = Math.round((Date.now() - startedAt) / 1_000);
  const report = {
    when: new Date().toISOString(),
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? '',
    loadAverage: os.loadavg(),
    elapsedS,
    shapes: { open: options.open, burst: options.burst },
    rows,
  };
  const outDir = path.resolve(__dirname, '../../../bench/out');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, 'spikes.json'), JSON.stringify(report, null, 2));
  console.log(`\n${summaryTable(rows)}\n\n${detailTable(rows)}\n\n${elapsedS} s; JSON in bench/out/spikes.json`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
