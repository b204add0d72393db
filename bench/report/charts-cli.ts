/**
 * `npm run bench:charts`: renders the charts of an existing bench report (bench/report/charts.ts)
 * without running the bench again.
 *
 *   npm run bench:charts -- [REPORT.json] [--out DIR]
 *
 * REPORT defaults to $BENCH_OUT, then bench/out/latest.json; DIR to the report's folder
 * (where `npm run bench` writes them too). BENCHMARKS.md's pictures:
 * `npm run bench:charts -- bench/out/latest.json --out docs/bench`.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { writeCharts, type BenchReport } from './charts';

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({ args: process.argv.slice(2), options: { out: { type: 'string' }, help: { type: 'boolean', short: 'h' } }, allowPositionals: true });
  if (values.help || positionals.length > 1) {
    process.stdout.write('usage: npm run bench:charts -- [REPORT.json] [--out DIR]\n');
    process.exit(values.help ? 0 : 2);
  }
  const reportFile = positionals[0] ?? (process.env['BENCH_OUT'] || path.join('bench', 'out', 'latest.json'));
  const report = JSON.parse(readFileSync(reportFile, 'utf8')) as BenchReport;
  const { written, skipped } = await writeCharts(report, values.out ?? path.dirname(reportFile));
  for (const { file, bytes } of written) process.stdout.write(`${file} (${(bytes / 1_024).toFixed(1)} KiB)\n`);
  for (const name of skipped) process.stdout.write(`${name}: no figures for it in ${reportFile}, not drawn\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:charts: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
