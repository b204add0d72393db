/**
 * Child processes where signals and exits matter: node with a pipe for stdout/stderr,
 * killed by pid in teardown if still running — and when the parent exits without its
 * teardown (a test worker that died, a benchmark that threw).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const running = new Set<ChildProcess>();
// One listener for all children (one each would trip Node's listener-count warning).
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * A file of this checkout's build (`dist/<segments>`), found from here both under vitest
 * (this file in stack/, the build in dist/ beside it) and from the build itself (dist/stack/).
 */
export function builtFile(...segments: string[]): string {
  const parent = path.resolve(__dirname, '..');
  return path.join(path.basename(parent) === 'dist' ? parent : path.join(parent, 'dist'), ...segments);
}

export interface ChildOptions {
  /** Raises the soft open-files limit to the hard one first (`ulimit -n`): ten thousand held runs need it. */
  raiseFdLimit?: boolean;
  /**
   * Keeps only the last this many characters of each stream (a benchmark's long run);
   * default: everything, for a test to search.
   */
  outputLimitChars?: number;
}

export interface Child {
  process: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or signal name); rejects after timeoutMs. */
  exited(timeoutMs: number): Promise<number | string>;
  /** Resolves when stdout matches `pattern`; rejects after timeoutMs. */
  waitForOutput(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
  /** SIGKILL, unless it has exited; resolves once it has. */
  kill(): Promise<void>;
}

/** Runs `node <args>` (this process's node) with `env` over this process's environment. */
export function startChild(args: readonly string[], env: Record<string, string> = {}, options: ChildOptions = {}): Child {
  const fullEnv = { ...process.env, ...env };
  const stdio: ['ignore', 'pipe', 'pipe'] = ['ignore', 'pipe', 'pipe'];
  // `exec` keeps the pid: the one signalled and measured is node itself.
  const child = options.raiseFdLimit
    ? spawn('bash', ['-c', 'ulimit -n "$(ulimit -Hn)" && exec "$0" "$@"', process.execPath, ...args], { env: fullEnv, stdio })
    : spawn(process.execPath, args, { env: fullEnv, stdio });
  const limit = options.outputLimitChars ?? Infinity;
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out = keepLast(out + d.toString(), limit)));
  child.stderr?.on('data', (d: Buffer) => (err = keepLast(err + d.toString(), limit)));
  running.add(child);
  const exit = exitOf(child).finally(() => running.delete(child));
  return {
    process: child,
    stdout: () => out,
    stderr: () => err,
    exited: (timeoutMs) =>
      Promise.race([
        exit,
        new Promise<never>((_r, reject) => setTimeout(() => reject(new Error(`child did not exit within ${timeoutMs} ms\nstdout: ${out}\nstderr: ${err}`)), timeoutMs).unref()),
      ]),
    waitForOutput: (pattern, timeoutMs) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          const match = out.match(pattern);
          if (!match) return;
          clearTimeout(timer);
          child.stdout?.off('data', check);
          resolve(match);
        };
        const timer = setTimeout(() => {
          child.stdout?.off('data', check);
          reject(new Error(`no ${pattern} in child output within ${timeoutMs} ms\nstdout: ${out}\nstderr: ${err}`));
        }, timeoutMs);
        child.stdout?.on('data', check);
        check();
      }),
    kill: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await exit;
    },
  };
}

function keepLast(text: string, limit: number): string {
  return text.length > limit ? text.slice(-limit) : text;
}

/** Resolves with the exit code (or signal name) of a child, already exited or not. */
export function exitOf(child: ChildProcess): Promise<number | string> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode ?? child.signalCode ?? -1);
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
}

/** Keeps the last `limit` characters a child wrote to stdout and stderr, for error messages. */
export function tailOutput(child: ChildProcess, limit = 8_192): () => string {
  let text = '';
  const keep = (chunk: Buffer): void => {
    text = keepLast(text + chunk.toString('utf8'), limit);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return () => text;
}
