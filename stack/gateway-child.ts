/**
 * A stack's gateway as a child process, as users run it: `node dist/src/main.js`, configured
 * only through LONGRUN_* variables, on loopback ports of its own. `deployed` runs it as the
 * image does (deployed-runtime.ts), with --expose-gc (the ops listener's POST /debug/gc: a
 * benchmark reads memory per run after a full GC) and the open-files limit raised.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { request, type Dispatcher } from 'undici';
import type { MemorySnapshot } from '../src/core/memory-snapshot';
import type { Step } from '../sandbox/scenario';
import { builtFile, startChild, type Child } from './child';
import { DEPLOYED_ALLOCATOR_ENV, DEPLOYED_NODE_ARGS } from './deployed-runtime';
import { executeJson, metricsText, runRecord, stopRun, type JsonReply } from './gateway-requests';
import { freePort, HOST } from './ports';
import { readRss } from './process-stats';

/** This checkout's build of the gateway. */
export const BUILT_GATEWAY_MAIN = builtFile('src', 'main.js');

/**
 * The gateway a stack's child replicas run by default: this checkout's build, or another
 * build's entry point (LONGRUN_TEST_GATEWAY_MAIN), to measure a fault test against an older gateway.
 */
export const defaultGatewayMain = (): string => process.env['LONGRUN_TEST_GATEWAY_MAIN'] ?? BUILT_GATEWAY_MAIN;

export interface GatewayChildOptions {
  /** Its LONGRUN_REPLICA_ID. */
  name: string;
  /** Its variables (LONGRUN_LOG_LEVEL defaults to warn); the listeners are this module's, not the env's. */
  env: Record<string, string>;
  /** The secret its owner tokens (stop, runRecord) are signed with. */
  secret: Buffer;
  /** The main listener's port (a replacement takes its predecessor's); default a free one. */
  port?: number;
  /** The entry point (default defaultGatewayMain()). */
  main?: string;
  /** Node flags before the entry point (e.g. --expose-gc, --cpu-prof). */
  nodeArgs?: readonly string[];
  /** Runs it as the image does, with --expose-gc and the open-files limit raised. */
  deployed?: boolean;
  /** Keeps only the last this many characters of its output (a long benchmark); default all. */
  outputLimitChars?: number;
  /** close() drains it (SIGTERM, 20 s) before SIGKILL: a profiled gateway writes its profile on a clean exit. */
  drainOnClose?: boolean;
}

/** What /debug/gc answers: a build from before the heap spaces were reported has none. */
export type HeapUsage = NodeJS.MemoryUsage & Partial<Pick<MemorySnapshot, 'spaces'>>;

/** Generous: a loaded 2-core machine starting several replicas at once takes its time. */
const READY_TIMEOUT_MS = 30_000;
/**
 * A port from freePort can be taken by another process before the replica binds it (test
 * files run in parallel), and a predecessor's port may not be free again at once: a replica
 * that exits on EADDRINUSE is started again, a few times.
 */
const START_ATTEMPTS = 3;
const SAME_PORT_RETRY_MS = 200;
const DRAIN_ON_CLOSE_MS = 20_000;

class AddressInUse extends Error {}

export class GatewayChild {
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly options: GatewayChildOptions,
    readonly child: Child,
    /** The main listener's port. */
    readonly port: number,
    readonly opsPort: number,
  ) {}

  static async start(options: GatewayChildOptions): Promise<GatewayChild> {
    for (const listener of ['LONGRUN_LISTEN', 'LONGRUN_OPS_LISTEN']) {
      if (options.env[listener] !== undefined) throw new Error(`${listener} of a child replica is the stack's: give \`port\` instead`);
    }
    for (let attempt = 1; ; attempt++) {
      try {
        return await GatewayChild.startOnce(options);
      } catch (err) {
        if (attempt >= START_ATTEMPTS || !(err instanceof AddressInUse)) throw err;
        if (options.port !== undefined) await sleep(SAME_PORT_RETRY_MS);
      }
    }
  }

  private static async startOnce(options: GatewayChildOptions): Promise<GatewayChild> {
    const port = options.port ?? (await freePort());
    const opsPort = await freePort();
    const { deployed = false } = options;
    const child = startChild(
      [...(deployed ? ['--expose-gc', ...DEPLOYED_NODE_ARGS] : []), ...(options.nodeArgs ?? []), options.main ?? defaultGatewayMain()],
      {
        ...(deployed ? DEPLOYED_ALLOCATOR_ENV : {}),
        LONGRUN_LISTEN: `${HOST}:${port}`,
        LONGRUN_OPS_LISTEN: `${HOST}:${opsPort}`,
        LONGRUN_REPLICA_ID: options.name,
        LONGRUN_LOG_LEVEL: 'warn',
        ...options.env,
      },
      { raiseFdLimit: deployed, ...(options.outputLimitChars === undefined ? {} : { outputLimitChars: options.outputLimitChars }) },
    );
    const gateway = new GatewayChild(options, child, port, opsPort);
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (!(await gateway.ready())) {
      if (Date.now() > deadline || child.process.exitCode !== null || child.process.signalCode !== null) {
        await child.kill();
        const message = `replica ${options.name} did not become ready\n${child.stdout()}\n${child.stderr()}`;
        throw child.stderr().includes('EADDRINUSE') ? new AddressInUse(message) : new Error(message);
      }
      await sleep(50);
    }
    return gateway;
  }

  get name(): string {
    return this.options.name;
  }

  get url(): string {
    return `http://${HOST}:${this.port}`;
  }

  get opsUrl(): string {
    return `http://${HOST}:${this.opsPort}`;
  }

  get pid(): number {
    return this.child.process.pid ?? -1;
  }

  /** What it wrote so far, stdout then stderr. */
  logs(): string {
    return `${this.child.stdout()}${this.child.stderr()}`;
  }

  metrics(): Promise<string> {
    return metricsText(this.opsUrl);
  }

  /** An execute of `steps`, its answer parsed (docs/spec.md §3). */
  execute(workflowId: string, steps: Step[]): Promise<JsonReply & { headers: Dispatcher.ResponseData['headers'] }> {
    return executeJson(this.url, workflowId, steps);
  }

  /** The owner's stop (gateway-requests.ts stopRun: `token` undefined signs one). */
  stop(workflowId: string, token?: string, body?: unknown): Promise<JsonReply> {
    return stopRun(this.url, this.options.secret, workflowId, token, body);
  }

  runRecord(workflowId: string): Promise<JsonReply> {
    return runRecord(this.url, this.options.secret, workflowId);
  }

  /** How many runs it holds now (GET /runs on the ops listener). */
  async runsInFlight(): Promise<number> {
    const res = await request(`${this.opsUrl}/runs`);
    const body = (await res.body.json()) as { runs: unknown[] };
    return body.runs.length;
  }

  /**
   * Runs a full GC in it (twice; `compact`: the compacting GC of a low-memory notification)
   * and returns its memory usage; needs `deployed` (or --expose-gc). A build older than
   * `compact` answers it with a plain GC.
   */
  async gc(compact = false): Promise<HeapUsage> {
    const res = await request(`${this.opsUrl}/debug/gc${compact ? '?compact' : ''}`, { method: 'POST' });
    if (res.statusCode !== 200) throw new Error(`POST /debug/gc answered ${res.statusCode}: is the gateway started with --expose-gc?`);
    return (await res.body.json()) as HeapUsage;
  }

  /** Its resident memory, in bytes. */
  rss(): number {
    return readRss(this.pid);
  }

  /** SIGTERM: the drain. */
  terminate(): void {
    this.child.process.kill('SIGTERM');
  }

  /** Resolves with its exit code (or signal name); rejects after timeoutMs. */
  exited(timeoutMs: number): Promise<number | string> {
    return this.child.exited(timeoutMs);
  }

  /** SIGKILL (a crash); resolves once it has exited. */
  kill(): Promise<void> {
    return this.child.kill();
  }

  /** SIGKILL, or with `drainOnClose` a drain first; idempotent. */
  close(): Promise<void> {
    return (this.closing ??= this.closeOnce());
  }

  /** Another process in its place, on its port, with its name and settings, once it is gone (SIGKILL if it is not). */
  async restart(): Promise<GatewayChild> {
    await this.kill();
    return GatewayChild.start({ ...this.options, port: this.port });
  }

  private async closeOnce(): Promise<void> {
    const { process: child } = this.child;
    if (this.options.drainOnClose && child.exitCode === null && child.signalCode === null) {
      this.terminate();
      if (
        await this.exited(DRAIN_ON_CLOSE_MS).then(
          () => true,
          () => false,
        )
      )
        return;
    }
    await this.kill();
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
}
