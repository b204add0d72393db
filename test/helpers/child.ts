/**
 * Child processes for tests where signals and exits matter: started with a pipe for
 * stdout/stderr, killed by pid in teardown if still running — and when the test worker
 * exits without its teardown.
 */
import { spawn, type ChildProcess } from 'node:child_process';

const running = new Set<ChildProcess>();
// One listener for all children (one each would trip Node's listener-count warning).
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export interface Child {
  process: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or signal name); rejects after timeoutMs. */
  exited(timeoutMs: number): Promise<number | string>;
  /** Resolves when stdout matches `pattern`; rejects after timeoutMs. */
  waitForOutput(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
  kill(): Promise<void>;
}

export function startChild(args: string[], env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  running.add(child);
  const exit = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => {
      running.delete(child);
      resolve(code ?? signal ?? -1);
    }),
  );
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
