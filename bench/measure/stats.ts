/**
 * Summary statistics for benchmark samples: nearest-rank percentiles over a sorted copy,
 * rounded for the report (milliseconds to 0.01 ms).
 */

/** The p-th percentile (0–100) by nearest rank; NaN for no samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

export function median(samples: readonly number[]): number {
  return percentile(samples, 50);
}

/** Rounds to `digits` decimals; NaN and infinities become null (JSON has no NaN). */
export function round(value: number, digits = 2): number | null {
  if (!Number.isFinite(value)) return null;
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

/** The ratio a / b, rounded; null when b is 0 or either is not a number. */
export function ratio(a: number, b: number, digits = 3): number | null {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b === 0) return null;
  return round(a / b, digits);
}
