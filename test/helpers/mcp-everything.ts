/**
 * The reference MCP server, `@modelcontextprotocol/server-everything` (a dev
 * dependency), in its streamable-HTTP mode (`dist/index.js streamableHttp`, port from
 * `PORT`) as a child process on a free loopback port. Started fresh, waited for until it
 * answers, and killed by pid in teardown — and when the test worker exits, whatever
 * happened.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { fromRoot } from '../../src/core/paths';
import { freePort } from '../../stack/ports';

export interface EverythingServer {
  /** The MCP endpoint, http://127.0.0.1:<port>/mcp. */
  url: string;
  output(): string;
  stop(): Promise<void>;
}

const ENTRY = fromRoot('node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
const LOOPBACK_ONLY = fromRoot('test', 'fixtures', 'loopback-listen.cjs');

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

async function answers(url: string): Promise<boolean> {
  try {
    // Without a session id the server answers 400: it is up.
    const res = await request(url, { method: 'GET', headersTimeout: 1_000 });
    await res.body.dump();
    return res.statusCode === 400;
  } catch {
    return false;
  }
}

async function startOnce(port: number, timeoutMs: number): Promise<EverythingServer | undefined> {
  // Only what node needs: the server has a tool that answers with its environment.
  const child = spawn(process.execPath, ['--require', LOOPBACK_ONLY, ENTRY, 'streamableHttp'], {
    env: { PATH: process.env['PATH'] ?? '', PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const exit = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const killOnExit = (): void => void child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const stop = async (): Promise<void> => {
    process.off('exit', killOnExit);
    if (!exited(child)) child.kill('SIGKILL');
    await exit;
  };
  const url = `http://127.0.0.1:${port}/mcp`;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !exited(child)) {
    if (await answers(url)) return { url, output: () => output, stop };
    await sleep(50);
  }
  await stop();
  if (/EADDRINUSE|already in use/.test(output)) return undefined;
  throw new Error(`the reference MCP server did not answer within ${timeoutMs} ms:\n${output}`);
}

/** Starts the reference server; retries on another port when its port was taken meanwhile. */
export async function startEverythingServer(timeoutMs = 15_000): Promise<EverythingServer> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const server = await startOnce(await freePort(), timeoutMs);
    if (server) return server;
  }
  throw new Error('the reference MCP server found no free port in 3 attempts');
}
