/** The printed table: one row per scenario, longrun beside its baseline and its target. */
import type { ScenarioOutcome } from '../scenario';

export interface ReportRow {
  name: string;
  outcome: ScenarioOutcome | undefined;
  error?: string;
  seconds: number;
}

function pad(cells: string[], widths: number[]): string {
  return `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
}

/** A Markdown table (readable in a terminal, pasteable into BENCHMARKS.md). */
export function printTable(rows: ReportRow[]): string {
  const header = ['scenario', 'longrun', 'baseline', 'ratio', 'target', 'met', 'time'];
  const body = rows.map(({ name, outcome, error, seconds }) => {
    const time = `${seconds.toFixed(0)} s`;
    if (!outcome) return [name, `FAILED: ${(error ?? '').split('\n')[0]?.slice(0, 100) ?? ''}`, '', '', '', 'no', time];
    const { row } = outcome;
    return [name, row.longrun, row.baseline, row.ratio, row.target, row.met === null ? '-' : row.met ? 'yes' : 'NO', time];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const lines = [pad(header, widths), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...body.map((r) => pad(r, widths))];
  return `\n${lines.join('\n')}\n`;
}
