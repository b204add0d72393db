/**
 * Prometheus tooling for the observability tests: the Prometheus text format parsed
 * into samples, `promtool` and a real `prometheus` server (Debian package `prometheus`)
 * started as a child process on a free loopback port, killed by pid in teardown.
 *
 * The binaries are optional on a developer's machine (the tests that need them skip
 * with a message) but required in CI (process.env.CI set): there they fail instead.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { freePort } from '../../stack/ports';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Every sample of a Prometheus text exposition, and each family's TYPE. */
export function parseExposition(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1] as string, type[2] as string);
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`unparsable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1] as string] = pair[2] as string;
    samples.push({ name: match[1] as string, labels, value: Number(match[3]) });
  }
  return { samples, types };
}

/** A sample's identity: `name{a="1",b="2"}` with labels sorted. */
export function seriesKey(name: string, labels: Record<string, string> = {}): string {
  const inner = Object.keys(labels)
    .sort()
    .map((k) => `${k}="${labels[k]}"`)
    .join(',');
  return `${name}{${inner}}`;
}

/** Where `name` is installed (PATH, then /usr/bin), or undefined. */
export function findBinary(name: string): string | undefined {
  for (const candidate of [name, `/usr/bin/${name}`]) {
    const probe = spawnSync(candidate, ['--version'], { stdio: 'ignore', timeout: 10_000 });
    if (!probe.error && probe.status === 0) return candidate;
  }
  return undefined;
}

/**
 * Why a test needing `binary` must skip, or undefined when it can run. In CI a missing
 * binary is not a reason: the test runs and fails loudly.
 */
export function skipReason(binary: string, found: string | undefined): string | undefined {
  const ci = process.env['CI'];
  if (found || (ci !== undefined && ci !== '' && ci !== 'false' && ci !== '0')) return undefined;
  return `${binary} is not installed (Debian package "prometheus"; .ci/run installs it); skipped outside CI`;
}

/** Runs `promtool check metrics` on `text`: its exit code and what it printed. */
export function promtoolCheckMetrics(promtool: string, text: string): { status: number | null; output: string } {
  const result = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 20_000 });
  if (result.error) throw result.error;
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

export interface PrometheusServer {
  url: string;
  pid: number;
  /** An instant query; throws unless Prometheus answers status "success". */
  query(expr: string): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>>;
  /** Polls `check` every 250 ms until it returns true, for at most timeoutMs. */
  waitUntil(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void>;
  log(): string;
  stop(): Promise<void>;
}

/**
 * Starts `prometheus` scraping `target` (host:port) every second, with its TSDB in a
 * fresh temporary directory. Retries on another port if the one picked was taken.
 */
export async function startPrometheus(binary: string, target: string, jobName = 'longrun'): Promise<PrometheusServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'longrun-prometheus-'));
  const configFile = path.join(dir, 'prometheus.yml');
  await writeFile(
    configFile,
    [
      'global:',
      '  scrape_interval: 1s',
      '  scrape_timeout: 1s',
      '  evaluation_interval: 1s',
      'scrape_configs:',
      `  - job_name: ${jobName}`,
      '    metrics_path: /metrics',
      '    static_configs:',
      `      - targets: ['${target}']`,
      '',
    ].join('\n'),
  );
  let lastLog = '';
  for (let attempt = 1; attempt <= 3; attempt++) {
    const port = await freePort();
    const child = spawn(
      binary,
      [`--config.file=${configFile}`, `--storage.tsdb.path=${path.join(dir, `tsdb-${attempt}`)}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let log = '';
    child.stdout?.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (log += d.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const url = `http://127.0.0.1:${port}`;
    if (await becomesReady(url, child, 15_000)) return server(url, child, exited, () => log, dir);
    lastLog = log;
    await kill(child, exited);
    if (!/address already in use/.test(log)) break;
  }
  await rm(dir, { recursive: true, force: true });
  throw new Error(`prometheus did not become ready:\n${lastLog}`);
}

async function becomesReady(url: string, child: ChildProcess, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && child.exitCode === null && child.signalCode === null) {
    try {
      const res = await request(`${url}/-/ready`, { headersTimeout: 1_000, bodyTimeout: 1_000 });
      await res.body.dump();
      if (res.statusCode === 200) return true;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

async function kill(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  process.kill(child.pid, 'SIGTERM');
  const timer = setTimeout(() => child.pid !== undefined && child.exitCode === null && process.kill(child.pid, 'SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

function server(url: string, child: ChildProcess, exited: Promise<void>, log: () => string, dir: string): PrometheusServer {
  let stopping: Promise<void> | undefined;
  return {
    url,
    pid: child.pid as number,
    log,
    async query(expr) {
      const res = await request(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`, { headersTimeout: 5_000, bodyTimeout: 5_000 });
      const body = (await res.body.json()) as { status: string; error?: string; data?: { result: Array<{ metric: Record<string, string>; value: [number, string] }> } };
      if (body.status !== 'success' || !body.data) throw new Error(`query ${expr} failed: ${body.error ?? res.statusCode}`);
      return body.data.result;
    },
    async waitUntil(what, check, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      let lastError: unknown;
      while (Date.now() < deadline) {
        try {
          if (await check()) return;
        } catch (err) {
          lastError = err;
        }
        await new Promise((r) => setTimeout(r, 250));
      }
      throw new Error(`prometheus: ${what} not seen within ${timeoutMs} ms${lastError ? ` (last error: ${String(lastError)})` : ''}\n${log()}`);
    },
    stop() {
      stopping ??= kill(child, exited).finally(() => rm(dir, { recursive: true, force: true }));
      return stopping;
    },
  };
}
