/**
 * What a benchmark scenario is (docs/spec.md §10): it measures longrun and its baseline in the
 * same run and returns the figures written under `scenarios.NAME` in the JSON, plus one
 * row of the printed table (with the target it is held to).
 */
import { metricSample } from '../stack/metric-text';
import type { BenchEnv } from './bench-stack';

export interface BenchOptions {
  /** The scenario's size (runs, requests, samples or turns; each scenario says which). */
  runs?: number;
  /** accept: the fixed offered rate, executes per second. */
  rate?: number;
  /** accept: seconds at the fixed rate (instead of --runs requests). */
  durationS?: number;
  /** accept: bursts of executes issued at once instead of the fixed rate and the ladder (bench/scenarios/accept-burst.ts). */
  burst?: boolean;
  /** dispatcher_hold: the turn length. */
  turnMs?: number;
  /** capacity: more sizes (runs held) to measure before --runs, for the memory-per-run chart. */
  sizes?: number[];
}

export interface ScenarioContext {
  env: BenchEnv;
  options: BenchOptions;
  log(message: string): void;
}

export interface TableRow {
  longrun: string;
  baseline: string;
  ratio: string;
  target: string;
  /** null when the scenario has no target or could not measure it. */
  met: boolean | null;
}

export interface ScenarioOutcome {
  figures: Record<string, unknown>;
  row: TableRow;
}

export interface Scenario {
  name: string;
  /** What --runs sizes, for --help. */
  sizes: string;
  defaultRuns: number;
  /** Run only when named with --scenario (too long for the default run's ~5 minutes). */
  onlyWhenNamed?: boolean;
  run(ctx: ScenarioContext): Promise<ScenarioOutcome>;
}

/**
 * prom-client's event-loop delay histogram samples a 10 ms timer, so an idle loop reads
 * ~10 ms; the lag is what exceeds the timer's own interval.
 */
export const LOOP_MONITOR_RESOLUTION_MS = 10;

/** The gateway's event-loop lag p99 since the previous /metrics scrape, in ms beyond the monitor's interval. */
export function loopLagP99Ms(metricsText: string): number {
  const seconds = metricSample(metricsText, 'nodejs_eventloop_lag_p99_seconds');
  if (seconds === undefined) return Number.NaN;
  return Math.max(0, seconds * 1_000 - LOOP_MONITOR_RESOLUTION_MS);
}

export function formatMs(ms: number | null): string {
  return ms === null || !Number.isFinite(ms) ? 'n/a' : `${ms.toFixed(ms < 10 ? 2 : 1)} ms`;
}

export function formatBytes(bytes: number | null): string {
  if (bytes === null || !Number.isFinite(bytes)) return 'n/a';
  return bytes >= 10_240 ? `${(bytes / 1_024).toFixed(1)} KiB` : `${Math.round(bytes)} B`;
}
