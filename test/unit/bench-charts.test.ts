/**
 * The bench's pictures (bench/report/charts.ts, drawn by bench/report/render-svg.ts): each chart drawn from a small report as an SVG
 * with its series, axis titles and one mark per point, bar or line, and no picture for a
 * chart whose figures the report does not hold.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { chartSpecs, writeCharts, type BenchReport, type ChartName } from '../../bench/report/charts';
import { renderSvg } from '../../bench/report/render-svg';

/** The shape bench/index.ts writes, three ladder steps, two capacity sizes, three relay rounds. */
function fixture(): BenchReport {
  return {
    longrun_version: '0.1.0',
    commit: 'abc123def456',
    started_at: '2026-12-01T11:14:38.540Z',
    scenarios: {
      accept: {
        requests: 4000,
        offered_rate_per_s: 200,
        overhead_p50_ms: 6.5,
        overhead_p99_ms: 19.2,
        direct_p50_ms: 1.5,
        direct_p99_ms: 17,
        max_rate_ladder: [
          { rate: 200, p50_ms: 5.1, p99_ms: 30.2, errors: 0 },
          { rate: 300, p50_ms: 7.4, p99_ms: 44.9, errors: 0 },
          { rate: 450, p50_ms: 12.9, p99_ms: 75.3, errors: 0 },
        ],
      },
      capacity: {
        runs: 10000,
        per_size: [
          { runs: 2000, bytes_per_run: 17000, raw_bytes_per_run: 15000, ramp_bytes_per_run: 40000, raw_ramp_bytes_per_run: 30000 },
          { runs: 10000, bytes_per_run: 16113, raw_bytes_per_run: 14193, ramp_bytes_per_run: 29291, raw_ramp_bytes_per_run: 18461 },
        ],
      },
      relay: {
        actions_per_s: 2865,
        direct_actions_per_s: 4097,
        ratio: 0.699,
        concurrency: 32,
        actions_per_round: 6000,
        rounds_actions_per_s: [2066, 2865, 3080],
        rounds_direct_actions_per_s: [3289, 4097, 4191],
      },
    },
  };
}

async function svgOf(report: BenchReport, name: ChartName): Promise<string> {
  const chart = chartSpecs(report).find((c) => c.name === name);
  if (!chart) throw new Error(`no ${name} chart`);
  return renderSvg(chart.spec);
}

/** How many marks of one kind vega drew (each carries its ARIA role description). */
function marks(svg: string, kind: 'point' | 'line mark' | 'bar' | 'rule mark'): number {
  return svg.split(`aria-roledescription="${kind}"`).length - 1;
}

/** Every text drawn: a `<text>`'s own, or each line (`<tspan>`) of a multi-line one. */
function texts(svg: string): string[] {
  return [...svg.matchAll(/<(text|tspan)[^>]*>([^<]+)<\/\1>/g)].map((m) => m[2] ?? '');
}

describe('bench charts', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('draws the accept ladder: a point per rate and percentile, a line per ladder percentile, the fixed-rate phases as points', async () => {
    const svg = await svgOf(fixture(), 'accept-ladder');
    expect(svg.startsWith('<svg')).toBe(true);
    const labels = texts(svg);
    for (const text of [
      'accept: overhead by offered rate',
      'offered rate (executes/s, open loop)',
      'overhead (ms, log scale)',
      'longrun, ladder steps',
      'longrun, fixed-rate phase',
      'bare client, fixed-rate phase',
      'p50',
      'p99',
    ]) {
      expect(labels).toContain(text);
    }
    expect(labels).toContain('npm run bench of 2026-12-01 11:14 UTC, longrun 0.1.0 at abc123def456');
    // 3 ladder steps × 2 percentiles, then longrun's and the bare client's fixed-rate p50 and p99.
    expect(marks(svg, 'point')).toBe(10);
    expect(marks(svg, 'line mark')).toBe(2);
    expect(svg).toContain('overhead (ms, log scale): 75.3; series: longrun, ladder steps');
  });

  it('draws memory per run against runs held: a point per size, side and moment, a line through the sizes for each', async () => {
    const svg = await svgOf(fixture(), 'memory-per-run');
    expect(svg.startsWith('<svg')).toBe(true);
    const labels = texts(svg);
    for (const text of [
      'capacity: memory per held run',
      'runs held at once',
      'RSS per held run (KiB)',
      'longrun',
      'raw holder',
      'settled (after a 22 s hold)',
      'right after the ramp',
    ]) {
      expect(labels).toContain(text);
    }
    expect(marks(svg, 'point')).toBe(8);
    expect(marks(svg, 'line mark')).toBe(4);
    expect(svg).toContain('runs held at once: 2,000; RSS per held run (KiB): 39.06; side: longrun; moment: right after the ramp');
  });

  it('draws one capacity size from a report from before per_size, as points only', async () => {
    const report = fixture();
    const scenarios = report.scenarios as Record<string, Record<string, unknown>>;
    scenarios['capacity'] = { runs: 10000, bytes_per_run: 16113, raw_bytes_per_run: 14193, ramp_bytes_per_run: 29291, raw_ramp_bytes_per_run: 18461 };
    const svg = await svgOf(report, 'memory-per-run');
    expect(marks(svg, 'point')).toBe(4);
    expect(marks(svg, 'line mark')).toBe(0);
    expect(texts(svg)).toContain('10,000');
  });

  it('draws relay actions per second by round: a bar per round and side, a median rule per side', async () => {
    const svg = await svgOf(fixture(), 'relay-rounds');
    expect(svg.startsWith('<svg')).toBe(true);
    const labels = texts(svg);
    for (const text of ['relay: actions per second, by round', 'round', 'relayed actions per second', 'longrun', 'direct']) expect(labels).toContain(text);
    expect(labels).toContain("dashed: each side's median, 2,865/s against 4,097/s direct (0.699x)");
    expect(marks(svg, 'bar')).toBe(6);
    expect(marks(svg, 'rule mark')).toBe(2);
  });

  it('leaves out a chart whose scenario the report does not hold or that failed, and removes its SVG from an earlier report', async () => {
    const report = fixture();
    const scenarios = report.scenarios as Record<string, unknown>;
    delete scenarios['accept'];
    scenarios['capacity'] = { error: 'gateway exited' };
    expect(chartSpecs(report).map((c) => c.name)).toEqual(['relay-rounds']);

    dir = mkdtempSync(path.join(os.tmpdir(), 'bench-charts-'));
    writeFileSync(path.join(dir, 'accept-ladder.svg'), '<svg>from another run</svg>');
    const { written, skipped } = await writeCharts(report, dir);
    expect(written.map((w) => path.basename(w.file))).toEqual(['relay-rounds.svg']);
    expect(skipped).toEqual(['accept-ladder', 'memory-per-run']);
    expect(existsSync(path.join(dir, 'accept-ladder.svg'))).toBe(false);
    expect(existsSync(path.join(dir, 'memory-per-run.svg'))).toBe(false);
    expect(readFileSync(path.join(dir, 'relay-rounds.svg'), 'utf8')).toMatch(/^<svg[\s\S]*<\/svg>\n$/);
  });

  it('draws no accept ladder from accept --burst figures (no offered rate, no ladder), and the other charts as before', () => {
    const report = fixture();
    const scenarios = report.scenarios as Record<string, unknown>;
    scenarios['accept'] = {
      mode: 'burst',
      burst_size: 200,
      bursts: 10,
      requests: 2000,
      first_action_ms: 20,
      overhead_p50_ms: 61.2,
      overhead_p99_ms: 140.5,
      direct_p50_ms: 12.1,
      direct_p99_ms: 30.4,
      cpu_ms_per_execute: { gateway: 2.1, owner_sim: 0.6, workflow_sim: 0.4, redis: 0.1, driver: 0.5 },
    };
    expect(chartSpecs(report).map((c) => c.name)).toEqual(['memory-per-run', 'relay-rounds']);
  });

  it('draws nothing for a report with no figures at all', () => {
    expect(chartSpecs({})).toEqual([]);
    expect(chartSpecs({ scenarios: { accept: { max_rate_ladder: [] }, relay: { rounds_actions_per_s: [] } } })).toEqual([]);
  });
});
