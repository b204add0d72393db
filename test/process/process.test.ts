/**
 * The gateway as users run it: `npm start` with no configuration is the sandbox; a
 * process that ran turns exits by itself once closed (nothing left behind).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startChild, type Child } from '../../stack/child';
import { metricValue } from '../../stack';

const root = path.resolve(__dirname, '../..');
const children: Child[] = [];
/** No configuration (the sandbox), both listeners on free loopback ports. */
const SANDBOX_ENV = {
  LONGRUN_LISTEN: '127.0.0.1:0',
  LONGRUN_OPS_LISTEN: '127.0.0.1:0',
  LONGRUN_OWNER_URL: '',
  LONGRUN_REDIS_URL: '',
  LONGRUN_LOG_LEVEL: 'warn',
};

afterEach(async () => {
  for (const child of children.splice(0)) await child.kill();
});

describe('what a start loads', () => {
  /** The modules a gateway started with `env` loaded by the time SIGTERM made it exit. */
  async function loadedBy(env: Record<string, string>): Promise<string[]> {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'longrun-loaded-'));
    try {
      const secret = path.join(dir, 'secret');
      writeFileSync(secret, randomBytes(32).toString('base64'));
      const loadedFile = path.join(dir, 'loaded.txt');
      const child = startChild(['-r', path.join(root, 'test/fixtures/loaded-modules.cjs'), path.join(root, 'dist/src/main.js')], {
        ...SANDBOX_ENV,
        LONGRUN_SECRET_FILE: secret,
        LONGRUN_TEST_LOADED_FILE: loadedFile,
        ...env,
      });
      children.push(child);
      await child.waitForOutput(/sandbox is up|"msg":"longrun listening"/, 15_000);
      child.process.kill('SIGTERM');
      expect(await child.exited(15_000)).toBe(0);
      return readFileSync(loadedFile, 'utf8').split('\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const simulators = (loaded: string[]): string[] => loaded.filter((f) => f.startsWith(path.join(root, 'dist/sandbox/')));
  // The SDK's MCP server and its HTTP transport (its client reaches a few shared helpers kept under server/, which do not count).
  const mcpServerSdk = (loaded: string[]): string[] => loaded.filter((f) => /@modelcontextprotocol\/sdk\/.*\/server\/(mcp|index|streamableHttp)\.js$/.test(f));

  it('a production start (an owner configured) loads no simulator module, nor the MCP server SDK they use; the sandbox loads them', async () => {
    // The owner need not answer: nothing is asked of it until an execute comes.
    const production = await loadedBy({ LONGRUN_OWNER_URL: 'http://127.0.0.1:9', LONGRUN_LOG_LEVEL: 'info' });
    expect(production.some((f) => f.endsWith(path.join('dist', 'src', 'gateway.js')))).toBe(true);
    expect(simulators(production)).toEqual([]);
    expect(mcpServerSdk(production)).toEqual([]);
    const sandbox = await loadedBy({});
    expect(simulators(sandbox).length).toBeGreaterThan(0);
    expect(mcpServerSdk(sandbox).length).toBeGreaterThan(0);
  });
});

describe('the sandbox (npm start with no configuration)', () => {
  it('prints a curl that starts a detached run; both listeners answer; SIGTERM exits 0', async () => {
    const child = startChild([path.join(root, 'dist/src/main.js')], SANDBOX_ENV);
    children.push(child);
    const [, curl] = await child.waitForOutput(/^\s*(curl -sS -X POST .+)$/m, 15_000);
    const ops = (await child.waitForOutput(/ops (http:\/\/\S+)/, 1_000))[1] as string;
    const url = /'(http:\/\/[^']+)'/.exec(curl as string)?.[1] as string;
    const body = /--data '(.+)'$/.exec(curl as string)?.[1] as string;
    const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(res.statusCode).toBe(202);
    expect(await res.body.json()).toMatchObject({ status: 'accepted', workflow_id: '1' });
    expect((await request(`${ops}/-/liveness`)).statusCode).toBe(200);
    expect((await request(`${ops}/-/readiness`)).statusCode).toBe(200);
    const runs = (await (await request(`${ops}/runs`)).body.json()) as { runs: unknown[] };
    expect(runs.runs).toHaveLength(1);
    // The benchmarks' GC route exists only in a process started with --expose-gc.
    expect((await request(`${ops}/debug/gc`, { method: 'POST' })).statusCode).toBe(404);
    child.process.kill('SIGTERM');
    expect(await child.exited(15_000)).toBe(0);
  });

  it('prints the follow’s curl -N before the curl that starts the run, and says so; pasted in that order, the follow shows the run from its run event on, the first checkpoint included, until idle', async () => {
    const child = startChild([path.join(root, 'dist/src/main.js')], SANDBOX_ENV);
    children.push(child);
    const [, start] = await child.waitForOutput(/^\s*(curl -sS -X POST .+)$/m, 15_000);
    const ops = (await child.waitForOutput(/ops (http:\/\/\S+)/, 1_000))[1] as string;
    const banner = child.stdout();
    const follow = /^\s*(curl -N .+)$/m.exec(banner)?.[1];
    expect(follow).toMatch(/^curl -N 'http:\/\/127\.0\.0\.1:\d+\/api\/v4\/ai\/duo_workflows\/workflows\/1\/follow'$/);
    // The follow first, and the banner says why: it waits for the run.
    expect(banner.indexOf(follow as string)).toBeLessThan(banner.indexOf(start as string));
    expect(banner.slice(0, banner.indexOf(follow as string))).toMatch(/First, follow workflow 1 live .*waits for the next run/);
    expect(banner.slice(banner.indexOf(follow as string), banner.indexOf(start as string))).toMatch(
      /Then, .*start a detached run of it: the follow shows every event from its run on, the first checkpoint included/,
    );
    const shell = (command: string): { done: Promise<{ code: number | null; stdout: string }>; stdout: () => string } => {
      const proc = spawn('sh', ['-c', command], { stdio: ['ignore', 'pipe', 'inherit'] });
      let stdout = '';
      proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      return { done: new Promise((resolve) => proc.once('exit', (code) => resolve({ code, stdout }))), stdout: () => stdout };
    };
    // curl -N prints the stream as it comes and exits when the gateway ends it (idle); nothing runs yet, so it waits.
    const following = shell(follow as string);
    const followersOpen = async (): Promise<number | undefined> => metricValue(await (await request(`${ops}/metrics`)).body.text(), 'longrun_followers_open');
    const deadline = Date.now() + 10_000;
    while ((await followersOpen()) !== 1) {
      expect(Date.now(), 'the follow is open').toBeLessThan(deadline);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(following.stdout()).toBe('');
    const started = await shell(start as string).done;
    expect(started.code).toBe(0);
    expect(JSON.parse(started.stdout)).toMatchObject({ status: 'accepted', workflow_id: '1' });
    const followed = await following.done;
    expect(followed.code).toBe(0);
    const events = [...followed.stdout.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
    expect(events.slice(0, 3)).toEqual(['run', 'checkpoint', 'action']);
    expect(events.slice(-3)).toEqual(['checkpoint', 'end', 'idle']);
    expect(events.filter((e) => e === 'checkpoint')).toHaveLength(4);
    // The run's first checkpoint, sent as it started, is there: the follow was known before the run began.
    expect(followed.stdout).toMatch(/^event: checkpoint\ndata: \{.*"checkpoint":"thinking"/m);
    expect(followed.stdout).toContain('"checkpoint":"wrote the answer"');
    expect(followed.stdout).toMatch(/^data: \{"run_id":"[^"]+","reason":"finished","in_flight":\[\],"resumable":false\}$/m);
    child.process.kill('SIGTERM');
    expect(await child.exited(15_000)).toBe(0);
  }, 30_000);

  it('started with --expose-gc (as the benchmarks start it), POST /debug/gc answers memory after a plain or a compacting GC', async () => {
    const child = startChild(['--expose-gc', path.join(root, 'dist/src/main.js')], SANDBOX_ENV);
    children.push(child);
    const ops = (await child.waitForOutput(/ops (http:\/\/\S+)/, 15_000))[1] as string;
    type Snapshot = { rss: number; heapUsed: number; spaces: Record<string, { size: number; used: number }> };
    const gc = async (query: string): Promise<Snapshot> => {
      const res = await request(`${ops}/debug/gc${query}`, { method: 'POST' });
      expect(res.statusCode).toBe(200);
      return (await res.body.json()) as Snapshot;
    };
    const plain = await gc('');
    const compacted = await gc('?compact');
    for (const snapshot of [plain, compacted]) {
      expect(snapshot.rss).toBeGreaterThan(snapshot.heapUsed);
      expect(snapshot.spaces['old_space']?.used).toBeGreaterThan(0);
    }
    // The compacting GC leaves the young generation at its minimum (one semi-space of 1 MiB, as V8 reports it).
    expect(compacted.spaces['new_space']?.size).toBeLessThanOrEqual(2 * 1024 * 1024);
    child.process.kill('SIGTERM');
    expect(await child.exited(15_000)).toBe(0);
  });

  it('an invalid variable stops start-up with a message naming it', async () => {
    const child = startChild([path.join(root, 'dist/src/main.js')], { LONGRUN_ACCEPT_WAIT_MS: 'soon' });
    children.push(child);
    expect(await child.exited(10_000)).toBe(1);
    expect(child.stderr()).toContain('LONGRUN_ACCEPT_WAIT_MS');
  });
});

describe('no timer or handle is left behind', () => {
  it('a process that ran detached turns (finished, run limit, rejected) exits by itself after close', async () => {
    const child = startChild([path.join(root, 'test/fixtures/clean-exit.cjs')]);
    children.push(child);
    expect(await child.exited(20_000)).toBe(0);
    expect(JSON.parse(child.stdout())).toEqual({ statuses: [202, 202, 400], ends: ['finished', 'run_limit'] });
  });
});
