/**
 * The gateway under test, run as users run it: `node dist/src/main.js` in its own
 * process, configured only through LONGRUN_* variables, started with --expose-gc so the
 * ops listener mounts POST /debug/gc (memory per run is read after a full GC).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { DEPLOYED_ALLOCATOR_ENV, DEPLOYED_NODE_ARGS, HOST, exitOf, freePort, readRss, tailOutput, waitUntil, withTimeout } from './procs';
import type { MemorySnapshot } from '../../src/core/memory-snapshot';

export interface GatewayProcessOptions {
  ownerUrl: string;
  redisUrl: string;
  secretFile: string;
  /** Extra variables (caps, drain timeout, OTEL_*, ...). */
  env?: Record<string, string>;
  /** Another build's dist/src/main.js to run (default gatewayMainJs). */
  mainJs?: string;
  /** Node flags for this gateway only (e.g. --heapsnapshot-signal), after BENCH_GATEWAY_NODE_ARGS. */
  nodeArgs?: readonly string[];
}

/** What /debug/gc answers: a build from before the heap spaces were reported (BENCH_GATEWAY_MAIN) has none. */
export type HeapUsage = NodeJS.MemoryUsage & Partial<Pick<MemorySnapshot, 'spaces'>>;

/**
 * The gateway to run: this build's, or another build's `dist/src/main.js` given in
 * BENCH_GATEWAY_MAIN (to measure a baseline build, e.g. main, with this bench).
 */
export const gatewayMainJs = process.env['BENCH_GATEWAY_MAIN'] || path.join(__dirname, '..', '..', 'src', 'main.js');

/** Extra node flags for the gateway, for profiling (e.g. `--cpu-prof --cpu-prof-dir=prof`). */
const extraNodeArgs = (process.env['BENCH_GATEWAY_NODE_ARGS'] ?? '').split(/\s+/).filter(Boolean);

/**
 * The commands the measured build's Lua scripts call inside Redis (lower case, as INFO
 * commandstats names them), read from its src/<dir>/*.lua for each of `dirs` it has: INFO
 * commandstats counts those beside the EVALSHA that ran them.
 */
export function scriptCommands(mainJs: string, dirs: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const sub of dirs) {
    const dir = path.join(path.dirname(mainJs), '..', '..', 'src', sub);
    // A build from before the bridge has no src/bridge.
    if (!existsSync(dir)) continue;
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.lua'))) {
      for (const match of readFileSync(path.join(dir, file), 'utf8').matchAll(/redis\.call\(\s*'([A-Za-z]+)'/g)) names.add((match[1] as string).toLowerCase());
    }
  }
  return names;
}

/** One sample of a Prometheus text exposition (labels ignored: the first sample named so). */
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

export class GatewayProcess {
  readonly exited: Promise<number | string>;

  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
    readonly opsUrl: string,
    readonly output: () => string,
  ) {
    this.exited = exitOf(child);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  static async start(options: GatewayProcessOptions): Promise<GatewayProcess> {
    const [port, opsPort] = [await freePort(), await freePort()];
    // Raise the soft descriptor limit to the hard one: ten thousand held runs need it.
    const child = spawn(
      'bash',
      [
        '-c',
        'ulimit -n "$(ulimit -Hn)" && exec "$0" "$@"',
        process.execPath,
        '--expose-gc',
        ...DEPLOYED_NODE_ARGS,
        ...extraNodeArgs,
        ...(options.nodeArgs ?? []),
        options.mainJs ?? gatewayMainJs,
      ],
      {
        env: {
          ...process.env,
          ...DEPLOYED_ALLOCATOR_ENV,
          LONGRUN_OWNER_URL: options.ownerUrl,
          LONGRUN_SECRET_FILE: options.secretFile,
          LONGRUN_REDIS_URL: options.redisUrl,
          LONGRUN_LISTEN: `${HOST}:${port}`,
          LONGRUN_OPS_LISTEN: `${HOST}:${opsPort}`,
          LONGRUN_LOG_LEVEL: 'warn',
          ...options.env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const gateway = new GatewayProcess(child, `http://${HOST}:${port}`, `http://${HOST}:${opsPort}`, tailOutput(child));
    let exited = false;
    void gateway.exited.then(() => (exited = true));
    await waitUntil(
      async () => {
        if (exited) throw new Error(`gateway exited before it was ready: ${gateway.output()}`);
        return gateway.ready();
      },
      15_000,
      'the gateway to be ready',
    );
    return gateway;
  }

  private async ready(): Promise<boolean> {
    try {
      const res = await request(`${this.opsUrl}/-/readiness`);
      await res.body.dump();
      return res.statusCode === 200;
    } catch {
      return false;
    }
  }

  /**
   * Runs a full GC in the gateway (twice; `compact`: the compacting GC of a low-memory
   * notification) and returns its memory usage. A build older than `compact` answers it
   * with a plain GC.
   */
  async gc(compact = false): Promise<HeapUsage> {
    const res = await request(`${this.opsUrl}/debug/gc${compact ? '?compact' : ''}`, { method: 'POST' });
    if (res.statusCode !== 200) throw new Error(`POST /debug/gc answered ${res.statusCode}: is the gateway started with --expose-gc?`);
    return (await res.body.json()) as HeapUsage;
  }

  /** Resident memory of the gateway process, in bytes. */
  rss(): number {
    return readRss(this.pid);
  }

  async metrics(): Promise<string> {
    const res = await request(`${this.opsUrl}/metrics`);
    return res.body.text();
  }

  async runsInFlight(): Promise<number> {
    const res = await request(`${this.opsUrl}/runs`);
    const body = (await res.body.json()) as { runs: unknown[] };
    return body.runs.length;
  }

  /** Sends SIGTERM (the drain). */
  terminate(): void {
    this.child.kill('SIGTERM');
  }

  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    if (extraNodeArgs.length > 0) {
      // A profiled gateway writes its profile on a clean exit: drain it instead.
      this.child.kill('SIGTERM');
      const exited = await withTimeout(this.exited, 20_000, 'the profiled gateway to exit').then(
        () => true,
        () => false,
      );
      if (exited) return;
    }
    this.child.kill('SIGKILL');
    await this.exited;
  }
}
