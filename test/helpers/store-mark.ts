/**
 * `longrun store mark` as operators run it: the built executable (`node dist/src/main.js store
 * mark`, what package.json's bin and the image's /usr/local/bin/longrun run), with `env` for its
 * LONGRUN_* variables (none of this process's).
 */
import path from 'node:path';
import { startChild } from '../../stack/child';

export const MAIN = path.resolve(__dirname, '../../dist/src/main.js');

/** Runs it to its end (at most 20 s): the exit status and what it wrote. */
export async function storeMark(env: Record<string, string>): Promise<{ status: number | string; stdout: string; stderr: string }> {
  const child = startChild([MAIN, 'store', 'mark'], { LONGRUN_REDIS_URL: '', LONGRUN_REDIS_KEYS: '', ...env });
  try {
    const status = await child.exited(20_000);
    return { status, stdout: child.stdout(), stderr: child.stderr() };
  } finally {
    await child.kill();
  }
}
