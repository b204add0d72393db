/** Samples read out of a gateway's Prometheus text (GET /metrics), for tests and benchmarks. */

/** The value of the one sample with exactly these labels, or undefined when absent. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (.+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found: Record<string, string> = {};
    for (const pair of (match[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) found[pair[1] as string] = pair[2] as string;
    if (Object.entries(labels).every(([k, v]) => found[k] === v) && Object.keys(found).length === Object.keys(labels).length) {
      return Number(match[4]);
    }
  }
  return undefined;
}

/** The first sample named so, whatever its labels; undefined when there is none. */
export function metricSample(text: string, name: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/** The sum of the samples named so whose labels include every one given; undefined when there is none. */
export function metricTotal(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  let found: number | undefined;
  for (const line of text.split('\n')) {
    if (!(line.startsWith(`${name} `) || line.startsWith(`${name}{`))) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    found = (found ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return found;
}

/**
 * The store fence's work as replicas' metrics count it: acquires and renewals that ended
 * with `result` (`fenced`: starts refused while it was up; `reasserted`: locks taken back).
 */
export async function lockOperations(replicas: ReadonlyArray<{ metrics(): Promise<string> }>, result: 'fenced' | 'reasserted'): Promise<number> {
  let total = 0;
  for (const replica of replicas) {
    const text = await replica.metrics();
    for (const op of ['acquire', 'renew']) total += Number(new RegExp(`^longrun_lock_operations_total\\{op="${op}",result="${result}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  }
  return total;
}
