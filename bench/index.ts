/**
 * `npm run bench`: the scenarios of docs/spec.md §10, each measuring longrun and its baseline in
 * the same run, against a real redis-server and the simulators, each in its own process.
 * Prints a table, writes JSON to $BENCH_OUT (default bench/out/latest.json) and the charts
 * of bench/report/charts.ts beside it (`<name>.svg`; `npm run bench:charts` redraws them from a report).
 *
 *   npm run bench -- [--scenario NAME[,NAME]] [--runs N] [--rate R] [--duration S] [--turn-ms MS] [--sizes N,N] [--burst]
 *
 * `scale` (three gateways holding thousands of runs each through a lease renewal period),
 * `ws_capacity` (5 000 WebSocket sessions held through a ping round, against a raw
 * holder), `ws_resume` (sessions dropping and re-attaching over two replicas) and
 * `ws_frames` (CPU and bytes per WebSocket frame, direct and bridged, two replicas) and
 * `tracing` (gateway CPU per execute and per relayed action, tracing off and on) run only
 * when named: each alone takes most of a minute or more, past the default run's ~5 minutes.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { version } from '../src/core/version';
import { writeCharts } from './report/charts';
import { startBenchRedis } from './measure/bench-redis';
import { printTable } from './report/report';
import type { BenchOptions, Scenario, ScenarioOutcome } from './scenario';
import { accept } from './scenarios/accept';
import { BURST_SIZE } from './scenarios/accept-burst';
import { capacity } from './scenarios/capacity';
import { dispatcherHold } from './scenarios/dispatcher-hold';
import { drain } from './scenarios/drain';
import { relay } from './scenarios/relay';
import { scale } from './scenarios/scale';
import { stopLatency } from './scenarios/stop-latency';
import { tracing } from './scenarios/tracing';
import { wsCapacity } from './scenarios/ws-capacity';
import { wsFrames } from './scenarios/ws-frames';
import { wsResume } from './scenarios/ws-resume';
import { follow } from './scenarios/follow';
import type { BenchEnv } from './bench-stack';

const scenarios: Scenario[] = [capacity, wsCapacity, accept, relay, drain, stopLatency, dispatcherHold, scale, wsResume, wsFrames, follow, tracing];

function usage(): string {
  const lines = scenarios.map((s) => `  ${s.name.padEnd(16)} --runs: ${s.sizes} (default ${s.defaultRuns})${s.onlyWhenNamed ? '; only with --scenario' : ''}`);
  const burst = [
    `accept --burst: instead of the fixed rate and the ladder, --runs detached executes in bursts of ${BURST_SIZE}`,
    `issued at once, each burst once the last one's runs have ended, after a warm-up burst, and the bare grpc-js`,
    `client's starts in the same bursts; reports CPU per accepted execute, per process. Takes no --rate or --duration.`,
  ];
  return `usage: npm run bench -- [--scenario NAME[,NAME...]] [--runs N] [--rate R] [--duration S] [--turn-ms MS] [--sizes N,N] [--burst]\n\nscenarios:\n${lines.join('\n')}\n\n${burst.join('\n')}\n`;
}

function positive(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number, got ${JSON.stringify(raw)}`);
  return value;
}

function parseCli(argv: string[]): { selected: Scenario[]; options: BenchOptions } {
  const { values } = parseArgs({
    args: argv,
    options: {
      scenario: { type: 'string', multiple: true },
      runs: { type: 'string' },
      rate: { type: 'string' },
      duration: { type: 'string' },
      'turn-ms': { type: 'string' },
      sizes: { type: 'string' },
      burst: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(usage());
    process.exit(0);
  }
  const names = (values.scenario ?? [])
    .flatMap((s) => s.split(','))
    .map((s) => s.trim())
    .filter(Boolean);
  const selected =
    names.length === 0
      ? scenarios.filter((s) => !s.onlyWhenNamed)
      : names.map((name) => {
          const found = scenarios.find((s) => s.name === name);
          if (!found) throw new Error(`unknown scenario ${JSON.stringify(name)}\n${usage()}`);
          return found;
        });
  if (values.burst && (values.rate !== undefined || values.duration !== undefined)) throw new Error(`--burst takes no --rate or --duration\n${usage()}`);
  const runs = positive('runs', values.runs);
  const sizes = values.sizes
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => Math.round(positive('sizes', s) ?? 0));
  return {
    selected,
    options: {
      runs: runs === undefined ? undefined : Math.round(runs),
      rate: positive('rate', values.rate),
      durationS: positive('duration', values.duration),
      turnMs: positive('turn-ms', values['turn-ms']),
      sizes,
      burst: values.burst,
    },
  };
}

function machine(): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    cores: os.availableParallelism(),
    cpu_model: cpus[0]?.model.trim() ?? 'unknown',
    memory_gib: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
  };
}

/**
 * The checkout the bench runs from (`git describe --always --dirty`: a `-dirty` suffix when
 * the tree has changes), or undefined outside a git checkout. With BENCH_GATEWAY_MAIN the
 * gateway measured is another build, named in the report's `gateway_main`.
 */
function checkout(): string | undefined {
  try {
    const described = execFileSync('git', ['describe', '--always', '--dirty', '--abbrev=12'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5_000 });
    return described.trim() || undefined;
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  const { selected, options } = parseCli(process.argv.slice(2));
  const out = process.env['BENCH_OUT'] || path.join('bench', 'out', 'latest.json');
  const started = Date.now();
  const commit = checkout();
  const log = (message: string): void => {
    process.stderr.write(`[${((Date.now() - started) / 1_000).toFixed(1).padStart(6)} s] ${message}\n`);
  };
  const redis = await startBenchRedis();
  const env: BenchEnv = { redis, secret: randomBytes(32) };
  const results: Record<string, Record<string, unknown>> = {};
  const rows: Array<{ name: string; outcome: ScenarioOutcome | undefined; error?: string; seconds: number }> = [];
  try {
    for (const scenario of selected) {
      log(`${scenario.name}: starting`);
      const t0 = Date.now();
      try {
        const outcome = await scenario.run({ env, options, log: (m) => log(`${scenario.name}: ${m}`) });
        results[scenario.name] = outcome.figures;
        rows.push({ name: scenario.name, outcome, seconds: (Date.now() - t0) / 1_000 });
      } catch (err) {
        const message = (err as Error).message;
        log(`${scenario.name}: FAILED: ${(err as Error).stack ?? message}`);
        results[scenario.name] = { error: message.slice(0, 2_000) };
        rows.push({ name: scenario.name, outcome: undefined, error: message, seconds: (Date.now() - t0) / 1_000 });
      }
      log(`${scenario.name}: done in ${((Date.now() - t0) / 1_000).toFixed(1)} s`);
    }
  } finally {
    await redis.stop();
  }
  const report = {
    longrun_version: version,
    commit,
    gateway_main: process.env['BENCH_GATEWAY_MAIN'] || undefined,
    started_at: new Date(started).toISOString(),
    duration_s: Math.round((Date.now() - started) / 100) / 10,
    machine: machine(),
    options,
    scenarios: results,
  };
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(printTable(rows));
  process.stdout.write(`\nJSON written to ${out} (${report.duration_s} s)\n`);
  if (rows.some((r) => r.error !== undefined)) process.exitCode = 1;
  // After the JSON: a chart that fails to draw loses no figure (npm run bench:charts redraws).
  try {
    const { written } = await writeCharts(report, path.dirname(out));
    for (const { file, bytes } of written) process.stdout.write(`chart written to ${file} (${(bytes / 1_024).toFixed(1)} KiB)\n`);
  } catch (err) {
    process.stderr.write(`bench: charts not drawn: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
