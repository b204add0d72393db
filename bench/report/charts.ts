/**
 * Pictures of a bench report (the JSON bench/index.ts writes): each chart's vega-lite spec
 * is a pure function of the report's figures, rendered to SVG headlessly by
 * bench/report/render-svg.ts. A chart whose figures the report does not hold (its scenario not
 * run, or failed) is left out.
 *
 * - accept-ladder: offered rate against the overhead p50 and p99, longrun's ladder steps,
 *   its fixed-rate phase and the bare grpc-js client's (measured at the fixed rate only);
 *   not drawn for accept --burst, which has no rate and no ladder;
 * - memory-per-run: RSS per held run against runs held, longrun and the raw-stream holder,
 *   settled and right after the ramp (capacity's `per_size`, or its one size);
 * - relay-rounds: relayed actions per second in each round, longrun and direct, with
 *   each side's median (the figure the relay ratio compares).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
// vega-lite's types by path: its package.json names them only under `exports`, which
// this project's `moduleResolution: node` does not read.
import type { Encoding } from 'vega-lite/build/encoding';
import type { TopLevelSpec } from 'vega-lite/build/index';
import { renderSvg } from './render-svg';

export const CHART_NAMES = ['accept-ladder', 'memory-per-run', 'relay-rounds'] as const;
export type ChartName = (typeof CHART_NAMES)[number];

/** A bench report as bench/index.ts writes it: what the charts read, every field checked. */
export interface BenchReport {
  longrun_version?: unknown;
  commit?: unknown;
  gateway_main?: unknown;
  started_at?: unknown;
  scenarios?: unknown;
}

export interface Chart {
  name: ChartName;
  spec: TopLevelSpec;
}

type Figures = Record<string, unknown>;
type Layered = Extract<TopLevelSpec, { layer: unknown }>;
type Channels = Encoding<string>;

const WIDTH = 520;
const HEIGHT = 280;
const LONGRUN = '#4c78a8';
const LONGRUN_LIGHT = '#9ecae9';
const BASELINE = '#f58518';

const thousands = new Intl.NumberFormat('en-US', { maximumFractionDigits: 3 });

/** A figure for a subtitle: `4,000`, or `?` when the report lacks it. */
function figure(value: number | undefined): string {
  return value === undefined ? '?' : thousands.format(value);
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function record(value: unknown): Figures | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Figures) : undefined;
}

/** A scenario's figures; undefined when it did not run or failed (its figures are `{ error }`). */
function scenario(report: BenchReport, name: string): Figures | undefined {
  const figures = record(record(report.scenarios)?.[name]);
  return figures === undefined || 'error' in figures ? undefined : figures;
}

/** Which run the pictures come from, for every chart's subtitle. */
export function runLabel(report: BenchReport): string {
  const started = typeof report.started_at === 'string' ? report.started_at.replace('T', ' ').replace(/:\d\d(\.\d+)?Z$/, ' UTC') : 'date not recorded';
  const version = typeof report.longrun_version === 'string' ? `longrun ${report.longrun_version}` : 'longrun';
  const commit = typeof report.commit === 'string' ? ` at ${report.commit}` : ', commit not recorded';
  const other = typeof report.gateway_main === 'string' ? ' (gateway: another build, BENCH_GATEWAY_MAIN)' : '';
  return `npm run bench of ${started}, ${version}${commit}${other}`;
}

/** Marks each row whose group (same `group` value) has more than one point: only those get a line. */
function joinable<T extends { group: string }>(rows: T[]): Array<T & { joined: boolean }> {
  const counts = new Map<string, number>();
  for (const row of rows) counts.set(row.group, (counts.get(row.group) ?? 0) + 1);
  return rows.map((row) => ({ ...row, joined: (counts.get(row.group) ?? 0) > 1 }));
}

/** The frame every chart shares: its title, which run it shows, the data and the layers drawing it. */
function layered(title: string, subtitle: string[], values: object[], layer: Layered['layer']): Layered {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, subtitle, anchor: 'start', subtitleColor: '#555' },
    width: WIDTH,
    height: HEIGHT,
    data: { values },
    layer,
    config: { background: 'white', font: 'sans-serif', view: { stroke: null }, legend: { orient: 'bottom', direction: 'vertical', labelLimit: 400 } },
  };
}

/** The ladder's limit (bench/scenarios/accept.ts): a step holds while its overhead p99 stays under it. */
const P99_LIMIT_MS = 50;
const ACCEPT_SERIES = ['longrun, ladder steps', 'longrun, fixed-rate phase', 'bare client, fixed-rate phase'] as const;

/** Offered rate against overhead p50/p99; undefined when the report has no accept figures, or those of --burst. */
export function acceptLadderSpec(report: BenchReport): TopLevelSpec | undefined {
  const accept = scenario(report, 'accept');
  if (!accept || accept['mode'] === 'burst') return undefined;
  type Row = { series: (typeof ACCEPT_SERIES)[number]; percentile: 'p50' | 'p99'; rate: number; ms: number; group: string };
  const rows: Row[] = [];
  // The y axis is logarithmic: an overhead that is not positive (none has been) is left out.
  const add = (series: Row['series'], rate: unknown, p50: unknown, p99: unknown): void => {
    const r = num(rate);
    if (r === undefined) return;
    for (const [percentile, value] of [
      ['p50', num(p50)],
      ['p99', num(p99)],
    ] as const) {
      if (value !== undefined && value > 0) rows.push({ series, percentile, rate: r, ms: value, group: `${series} ${percentile}` });
    }
  };
  const ladder = Array.isArray(accept['max_rate_ladder']) ? accept['max_rate_ladder'] : [];
  for (const step of ladder) add('longrun, ladder steps', record(step)?.['rate'], record(step)?.['p50_ms'], record(step)?.['p99_ms']);
  add('longrun, fixed-rate phase', accept['offered_rate_per_s'], accept['overhead_p50_ms'], accept['overhead_p99_ms']);
  add('bare client, fixed-rate phase', accept['offered_rate_per_s'], accept['direct_p50_ms'], accept['direct_p99_ms']);
  if (rows.length === 0) return undefined;
  const requests = num(accept['requests']);
  const rate = num(accept['offered_rate_per_s']);
  const color: Channels['color'] = { field: 'series', type: 'nominal', title: null, scale: { domain: [...ACCEPT_SERIES], range: [LONGRUN, LONGRUN_LIGHT, BASELINE] } };
  const x: Channels['x'] = { field: 'rate', type: 'quantitative', title: 'offered rate (executes/s, open loop)' };
  const y: Channels['y'] = { field: 'ms', type: 'quantitative', title: 'overhead (ms, log scale)', scale: { type: 'log' } };
  return layered(
    'accept: overhead by offered rate',
    [
      'time to the 202 minus the simulated 20 ms to the first action',
      'ladder: 4 s steps, up by half again while p99 < 50 ms (dotted), down by halves when not',
      `fixed-rate phase: ${figure(requests)} executes at ${figure(rate)}/s; the bare grpc-js client is measured there only`,
      runLabel(report),
    ],
    joinable(rows),
    [
      // One datum of their own: with the chart's data, the rule and its label are drawn once per row.
      { data: { values: [{}] }, mark: { type: 'rule', strokeDash: [2, 2], color: '#999' }, encoding: { y: { datum: P99_LIMIT_MS, type: 'quantitative' } } },
      {
        data: { values: [{}] },
        mark: { type: 'text', align: 'left', baseline: 'bottom', dx: 4, dy: -2, color: '#777' },
        encoding: { x: { value: 0 }, y: { datum: P99_LIMIT_MS, type: 'quantitative' }, text: { value: `p99 limit of the ladder, ${P99_LIMIT_MS} ms` } },
      },
      {
        transform: [{ filter: 'datum.joined' }],
        mark: { type: 'line' },
        encoding: { x, y, color, strokeDash: { field: 'percentile', type: 'nominal', title: null }, detail: { field: 'group' } },
      },
      {
        mark: { type: 'point', filled: true, size: 60 },
        encoding: {
          x,
          y,
          color,
          shape: { field: 'percentile', type: 'nominal', title: null },
          tooltip: [{ field: 'series' }, { field: 'percentile' }, { field: 'rate', title: 'executes/s' }, { field: 'ms', title: 'overhead ms' }],
        },
      },
    ],
  );
}

const MEMORY_SIDES = ['longrun', 'raw holder'] as const;
const MEMORY_MOMENTS = ['settled (after a 22 s hold)', 'right after the ramp'] as const;

/** RSS per held run against runs held; undefined when the report has no capacity figures. */
export function memoryPerRunSpec(report: BenchReport): TopLevelSpec | undefined {
  const capacity = scenario(report, 'capacity');
  if (!capacity) return undefined;
  type Row = { side: (typeof MEMORY_SIDES)[number]; moment: (typeof MEMORY_MOMENTS)[number]; runs: number; kib: number; group: string };
  // A report from before `per_size` holds its one size in the headline figures.
  const sizes = Array.isArray(capacity['per_size']) ? capacity['per_size'].map(record) : [capacity];
  const rows: Row[] = [];
  for (const size of sizes) {
    const runs = num(size?.['runs']);
    if (!size || runs === undefined) continue;
    const add = (side: Row['side'], moment: Row['moment'], bytes: unknown): void => {
      const b = num(bytes);
      if (b !== undefined) rows.push({ side, moment, runs, kib: Math.round((b / 1_024) * 100) / 100, group: `${side} ${moment}` });
    };
    add('longrun', MEMORY_MOMENTS[0], size['bytes_per_run']);
    add('raw holder', MEMORY_MOMENTS[0], size['raw_bytes_per_run']);
    add('longrun', MEMORY_MOMENTS[1], size['ramp_bytes_per_run']);
    add('raw holder', MEMORY_MOMENTS[1], size['raw_ramp_bytes_per_run']);
  }
  if (rows.length === 0) return undefined;
  const color: Channels['color'] = { field: 'side', type: 'nominal', title: null, scale: { domain: [...MEMORY_SIDES], range: [LONGRUN, BASELINE] } };
  // zero: one size alone would otherwise be a domain of one value, drawn mid-axis.
  const x: Channels['x'] = { field: 'runs', type: 'quantitative', title: 'runs held at once', scale: { zero: true }, axis: { format: ',d' } };
  const y: Channels['y'] = { field: 'kib', type: 'quantitative', title: 'RSS per held run (KiB)' };
  const moment = { field: 'moment', type: 'nominal', title: null, scale: { domain: [...MEMORY_MOMENTS] } } as const satisfies Channels['shape'];
  return layered(
    'capacity: memory per held run',
    [
      'RSS grown per held run, after a full GC, above 200 warm-up runs held',
      'raw holder: one process holding as many raw grpc-js streams to the same service',
      ...(new Set(rows.map((r) => r.runs)).size === 1 ? ['one size in this run (npm run bench -- --scenario capacity --sizes N,N measures more)'] : []),
      runLabel(report),
    ],
    joinable(rows),
    [
      { transform: [{ filter: 'datum.joined' }], mark: { type: 'line' }, encoding: { x, y, color, strokeDash: moment, detail: { field: 'group' } } },
      {
        mark: { type: 'point', filled: true, size: 70 },
        encoding: { x, y, color, shape: moment, tooltip: [{ field: 'side' }, { field: 'moment' }, { field: 'runs', title: 'runs held' }, { field: 'kib', title: 'KiB per run' }] },
      },
    ],
  );
}

const RELAY_SIDES = ['longrun', 'direct'] as const;

/** Relayed actions per second in each round; undefined when the report has no relay rounds. */
export function relayRoundsSpec(report: BenchReport): TopLevelSpec | undefined {
  const relay = scenario(report, 'relay');
  if (!relay) return undefined;
  type Row = { side: (typeof RELAY_SIDES)[number]; round: number; perS: number };
  const rows: Row[] = [];
  for (const [side, field] of [
    ['longrun', 'rounds_actions_per_s'],
    ['direct', 'rounds_direct_actions_per_s'],
  ] as const) {
    const rounds = Array.isArray(relay[field]) ? (relay[field] as unknown[]) : [];
    rounds.forEach((value, i) => {
      const perS = num(value);
      if (perS !== undefined) rows.push({ side, round: i + 1, perS });
    });
  }
  if (rows.length === 0) return undefined;
  const medians = [
    { side: 'longrun', perS: num(relay['actions_per_s']) },
    { side: 'direct', perS: num(relay['direct_actions_per_s']) },
  ].filter((m) => m.perS !== undefined);
  const color: Channels['color'] = { field: 'side', type: 'nominal', title: null, scale: { domain: [...RELAY_SIDES], range: [LONGRUN, BASELINE] } };
  const y: Channels['y'] = { field: 'perS', type: 'quantitative', title: 'relayed actions per second' };
  return layered(
    'relay: actions per second, by round',
    [
      `${figure(num(relay['concurrency']))} runs in flight, ${figure(num(relay['actions_per_round']))} actions per side per round, the sides alternating`,
      `dashed: each side's median, ${figure(num(relay['actions_per_s']))}/s against ${figure(num(relay['direct_actions_per_s']))}/s direct (${figure(num(relay['ratio']))}x)`,
      runLabel(report),
    ],
    rows,
    [
      {
        mark: { type: 'bar' },
        encoding: {
          x: { field: 'round', type: 'ordinal', title: 'round', axis: { labelAngle: 0 } },
          xOffset: { field: 'side', scale: { domain: [...RELAY_SIDES] } },
          y,
          color,
          tooltip: [{ field: 'side' }, { field: 'round' }, { field: 'perS', title: 'actions/s' }],
        },
      },
      { data: { values: medians }, mark: { type: 'rule', strokeDash: [6, 3], strokeWidth: 2 }, encoding: { y, color } },
    ],
  );
}

/** Every chart the report has the figures for, in CHART_NAMES order. */
export function chartSpecs(report: BenchReport): Chart[] {
  const builders: Record<ChartName, (r: BenchReport) => TopLevelSpec | undefined> = {
    'accept-ladder': acceptLadderSpec,
    'memory-per-run': memoryPerRunSpec,
    'relay-rounds': relayRoundsSpec,
  };
  return CHART_NAMES.flatMap((name) => {
    const spec = builders[name](report);
    return spec ? [{ name, spec }] : [];
  });
}

/**
 * Writes `DIR/<name>.svg` for every chart the report has the figures for, and removes the
 * SVG of a chart it has none for (left by another report, it would be mistaken for this
 * one's). Resolves with the files written (and their sizes) and the charts left out.
 */
export async function writeCharts(report: BenchReport, dir: string): Promise<{ written: Array<{ file: string; bytes: number }>; skipped: ChartName[] }> {
  mkdirSync(dir, { recursive: true });
  const charts = chartSpecs(report);
  const written: Array<{ file: string; bytes: number }> = [];
  for (const { name, spec } of charts) {
    const svg = await renderSvg(spec);
    const file = path.join(dir, `${name}.svg`);
    writeFileSync(file, svg.endsWith('\n') ? svg : `${svg}\n`);
    written.push({ file, bytes: Buffer.byteLength(svg) });
  }
  const skipped = CHART_NAMES.filter((name) => !charts.some((c) => c.name === name));
  for (const name of skipped) rmSync(path.join(dir, `${name}.svg`), { force: true });
  return { written, skipped };
}
