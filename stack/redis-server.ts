/**
 * The one redis-server starter (tests, benchmarks, the example dispatcher's demo): a real
 * redis-server child process on a loopback port (docs/spec.md §5). Nothing is persisted
 * (`--save ''`, no AOF) and the working directory is a fresh temporary folder, so its data
 * dies with it. Options make it a replica, a password-protected server or a Sentinel
 * (redis-sentinel.ts), or a Cluster node (redis-cluster.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { markNewStore } from '../src/coordination/store-mark';
import { parseRedisUrl } from '../src/redis/url';
import { freePort, HOST } from './ports';

export interface RedisServerOptions {
  /** Extra redis-server arguments, after longrun's defaults (e.g. `['--replicaof', host, port]`). */
  args?: string[];
  /** A configuration file's text, written to the server's folder and given first (Sentinel needs one it can rewrite). */
  config?: string;
  /** Run as a Sentinel (`--sentinel`). */
  sentinel?: boolean;
  /** `--requirepass`: the readiness PING authenticates with it, and `url` carries it. */
  password?: string;
  /**
   * Mark a primary of its own as a new store (`longrun store mark`'s function), as an
   * operator would before the gateways use it (default true). False: the gateways find it
   * unmarked, and fence it until it is one lease TTL old (store-fence.lua).
   */
  mark?: boolean;
}

export interface RedisServer {
  /** redis://127.0.0.1:<port> (redis://:<password>@… with a password) */
  readonly url: string;
  readonly port: number;
  /** The pid of the current redis-server process (changes on restart). */
  readonly pid: number | undefined;
  /** SIGTERM, then SIGKILL after 2 s; resolves once the process has exited. Idempotent. */
  stop(): Promise<void>;
  /** SIGKILL at once (a crashed server: nothing flushed, no goodbye to clients or peers); resolves once it has exited. */
  kill(): Promise<void>;
  /** Stops the server and starts a fresh, empty one on the same port (unmarked: a restart, which the gateways fence). */
  restart(): Promise<void>;
}

const READY_TIMEOUT_MS = 10_000;
const KILL_AFTER_MS = 2_000;
// The port from freePort can be taken by someone else before redis binds it.
const PORT_ATTEMPTS = 5;

class RedisProcess implements RedisServer {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private output = '';
  private readonly dir = mkdtempSync(path.join(os.tmpdir(), 'longrun-redis-'));
  private configWritten = false;
  // A test worker that dies without its afterAll must not leave redis-server behind.
  private readonly killOnExit = (): void => {
    this.child?.kill('SIGKILL');
  };

  constructor(
    readonly port: number,
    private readonly options: RedisServerOptions = {},
  ) {}

  get url(): string {
    return this.options.password === undefined ? `redis://${HOST}:${this.port}` : `redis://:${encodeURIComponent(this.options.password)}@${HOST}:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Spawns redis-server and waits until it answers PING; throws with its output if it exits. */
  async spawn(): Promise<void> {
    this.output = '';
    mkdirSync(this.dir, { recursive: true });
    const { config, sentinel, password, args = [] } = this.options;
    const configFile = path.join(this.dir, sentinel ? 'sentinel.conf' : 'redis.conf');
    // A restart keeps what a Sentinel wrote to its file (as a restarted Sentinel would).
    if (config !== undefined && !this.configWritten) {
      writeFileSync(configFile, config);
      this.configWritten = true;
    }
    const child = spawn(
      'redis-server',
      [
        ...(config !== undefined ? [configFile] : []),
        ...(sentinel ? ['--sentinel'] : []),
        '--port',
        String(this.port),
        '--bind',
        HOST,
        '--save',
        '',
        '--appendonly',
        'no',
        '--protected-mode',
        'no',
        '--dir',
        this.dir,
        ...(password !== undefined ? ['--requirepass', password] : []),
        ...args,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child = child;
    const keep = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString('utf8')).slice(-4_096);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    // A failed spawn (ENOENT) emits 'error' and never 'exit'.
    this.exited = new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    const spawnError = new Promise<never>((_resolve, reject) =>
      child.once('error', (err) => reject(new Error(`cannot start redis-server (is it installed? .ci/run installs it): ${err.message}`))),
    );
    process.once('exit', this.killOnExit);
    try {
      await Promise.race([this.waitUntilReady(child), spawnError]);
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  stop(): Promise<void> {
    const child = this.child;
    process.off('exit', this.killOnExit);
    if (!child || child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return this.exited;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), KILL_AFTER_MS);
    return this.exited.finally(() => clearTimeout(killer));
  }

  kill(): Promise<void> {
    const child = this.child;
    process.off('exit', this.killOnExit);
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    return this.exited;
  }

  /**
   * Stops the server and starts a fresh, empty one on the same port — unmarked: a store that
   * lost its data, which the gateways fence (store-fence.lua).
   */
  async restart(): Promise<void> {
    await this.stop();
    // The port was ours a moment ago; a client's reconnect attempts cannot hold it, but
    // retry briefly in case the kernel has not let go of it yet.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.spawn();
        return;
      } catch (err) {
        if (attempt >= PORT_ATTEMPTS || !(err instanceof RedisExitedError && /address already in use/i.test(err.output))) throw err;
        await sleep(100);
      }
    }
  }

  /** Stops the server and removes its working directory. */
  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async waitUntilReady(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new RedisExitedError(`redis-server exited (${child.exitCode ?? child.signalCode}): ${this.output.trim()}`, this.output);
      }
      if (await ping(this.port, this.options.password)) return;
      await sleep(20);
    }
    throw new Error(`redis-server on port ${this.port} did not answer PING within ${READY_TIMEOUT_MS} ms: ${this.output.trim()}`);
  }
}

class RedisExitedError extends Error {
  constructor(
    message: string,
    readonly output: string,
  ) {
    super(message);
  }
}

/** True when something on the port answers a raw PING (after AUTH, given a password) with +PONG within 500 ms. */
function ping(port: number, password?: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: HOST, port });
    let reply = '';
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), 500);
    const replies = password === undefined ? 1 : 2;
    socket.once('connect', () => socket.write(`${password === undefined ? '' : `AUTH ${password}\r\n`}PING\r\n`));
    socket.on('data', (chunk) => {
      reply += chunk.toString('utf8');
      const lines = reply.split('\r\n');
      if (lines.length > replies) done(lines[replies - 1] === '+PONG');
    });
    socket.once('error', () => done(false));
    socket.once('close', () => done(false));
  });
}

/**
 * Starts a redis-server on a free loopback port and resolves once it answers PING.
 * `stop()` must be called (in afterAll/afterEach); it also removes the server's
 * temporary working directory.
 */
export async function startRedis(options: RedisServerOptions = {}): Promise<RedisServer> {
  let lastError: unknown;
  const args = options.args ?? [];
  // A primary of its own is marked; a replica gets the mark from its primary, and a Cluster's nodes are marked once it formed.
  const primary = options.mark !== false && !options.sentinel && !args.includes('--replicaof') && !args.includes('--cluster-enabled');
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    const server = new RedisProcess(await freePort(HOST), options);
    try {
      await server.spawn();
      if (primary) await markStore(server.url);
    } catch (err) {
      await server.dispose();
      lastError = err;
      if (err instanceof RedisExitedError && /address already in use/i.test(err.output)) continue;
      throw err;
    }
    return {
      url: server.url,
      port: server.port,
      get pid() {
        return server.pid;
      },
      stop: () => server.dispose(),
      kill: () => server.kill(),
      restart: () => server.restart(),
    };
  }
  throw lastError;
}

/**
 * Marks a new server as a new store, as an operator would with `longrun store mark` (the
 * same function: it refuses a store holding lock keys). A gateway fences a Redis it finds
 * unmarked until it is one lease TTL old — a new server and one restarted empty look alike
 * (store-fence.lua) — so a test that starts a server and runs at once marks it first. A
 * restart (empty, unmarked) is then the data loss a fleet must survive. `cluster`: the URL
 * names a Redis Cluster; every primary is marked.
 */
export async function markStore(url: string, options: { cluster?: boolean } = {}): Promise<void> {
  const result = await markNewStore(parseRedisUrl(url, { cluster: options.cluster ?? false }));
  if (result.outcome !== 'marked') throw new Error(`could not mark ${url} as a new store: ${JSON.stringify(result.primaries)}`);
}

/** Sends SIGCONT to a server a test may have paused with SIGSTOP (no-op when it is gone). */
export function resume(server: RedisServer | undefined): void {
  if (server?.pid === undefined) return;
  try {
    process.kill(server.pid, 'SIGCONT');
  } catch {
    // Already exited.
  }
}
