/**
 * scripts/ensure-test-deps.sh, the pretest step that makes `npm test` work on a fresh
 * machine: with everything installed it does nothing; as root with apt-get it installs
 * the missing packages (apt-get update, then install, daemons held back by a policy-rc.d
 * for the duration); otherwise it stops at once with the command to run. The apt and
 * non-root cases run the script with a PATH of stubs (`id`, `apt-get`) that record what
 * they were asked; nothing is installed and no system file is touched.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { fromRoot } from '../../src/core/paths';
import { findBinary } from '../helpers/prometheus';

const SCRIPT = fromRoot('scripts/ensure-test-deps.sh');
const dirs: string[] = [];

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A PATH holding only stubs and the few tools the script itself uses. */
function stubPath(options: { uid: number; aptGet: boolean }): { bin: string; log: string; policy: string } {
  const bin = mkdtempSync(path.join(os.tmpdir(), 'longrun-deps-'));
  dirs.push(bin);
  const log = path.join(bin, 'calls.log');
  const policy = path.join(bin, 'policy-rc.d');
  const script = (name: string, body: string): void => writeFileSync(path.join(bin, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  for (const tool of ['chmod', 'rm']) symlinkSync(`/bin/${tool}`, path.join(bin, tool));
  script('id', `echo ${options.uid}`);
  if (options.aptGet) {
    // Records each call, whether the policy was in place and the frontend; `install`
    // puts stub binaries on PATH as the real packages would.
    script(
      'apt-get',
      [
        `echo "$* | policy=$([ -x '${policy}' ] && echo yes || echo no) | frontend=\${DEBIAN_FRONTEND:-}" >> '${log}'`,
        'if [ "$1" = install ]; then',
        `  for b in redis-server promtool prometheus chromium ruby; do printf '#!/bin/sh\\nexit 0\\n' > '${bin}'/$b; /bin/chmod +x '${bin}'/$b; done`,
        'fi',
      ].join('\n'),
    );
  }
  return { bin, log, policy };
}

function run(bin: string, policy: string): { status: number | null; stdout: string; stderr: string; ms: number } {
  const started = Date.now();
  const result = spawnSync('/bin/bash', [SCRIPT], { env: { PATH: bin, LONGRUN_POLICY_RC_D: policy }, encoding: 'utf8', timeout: 10_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, ms: Date.now() - started };
}

it('with redis-server, promtool, prometheus, chromium and ruby installed, it exits 0 at once and installs nothing', (ctx) => {
  const needed = ['redis-server', 'promtool', 'prometheus', 'chromium', 'ruby'];
  const found = needed.filter((b) => findBinary(b) !== undefined);
  if (found.length < needed.length) {
    // Running it here would install them for real.
    ctx.skip('not all five are installed; `npm test` installs them first');
    return;
  }
  const started = Date.now();
  const result = spawnSync('/bin/bash', [SCRIPT], { encoding: 'utf8', timeout: 10_000 });
  expect(result.status).toBe(0);
  expect(`${result.stdout}${result.stderr}`).toBe('');
  expect(Date.now() - started).toBeLessThan(5_000);
});

it('not root: stops at once with the exact command to run, and calls no package manager', () => {
  const { bin, log, policy } = stubPath({ uid: 1000, aptGet: true });
  const result = run(bin, policy);
  expect(result.status).toBe(1);
  expect(result.stderr).toContain('the tests need redis-server promtool prometheus chromium ruby, not found on PATH');
  expect(result.stderr).toContain('  sudo apt-get update && sudo apt-get install -y --no-install-recommends redis-server prometheus chromium ruby\n');
  expect(existsSync(log)).toBe(false);
  expect(existsSync(policy)).toBe(false);
  expect(result.ms).toBeLessThan(2_000);
});

it('root without apt-get: stops with the packages to install', () => {
  const { bin, policy } = stubPath({ uid: 0, aptGet: false });
  const result = run(bin, policy);
  expect(result.status).toBe(1);
  expect(result.stderr).toContain('Debian/Ubuntu: redis-server prometheus chromium ruby;');
});

it('root with apt-get: apt-get update, then install of the missing packages with their daemons held back', () => {
  const { bin, log, policy } = stubPath({ uid: 0, aptGet: true });
  const result = run(bin, policy);
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
  expect(result.stdout).toContain('installing redis-server prometheus chromium ruby (for redis-server promtool prometheus chromium ruby)');
  expect(readFileSync(log, 'utf8').trim().split('\n')).toEqual([
    'update | policy=yes | frontend=',
    'install -y --no-install-recommends redis-server prometheus chromium ruby | policy=yes | frontend=noninteractive',
  ]);
  // The policy was the script's own: removed afterwards.
  expect(existsSync(policy)).toBe(false);
});

it('root with apt-get and only promtool missing: installs prometheus alone', () => {
  const { bin, log, policy } = stubPath({ uid: 0, aptGet: true });
  for (const b of ['redis-server', 'prometheus', 'chromium', 'ruby']) writeFileSync(path.join(bin, b), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  const result = run(bin, policy);
  expect(result.status).toBe(0);
  expect(readFileSync(log, 'utf8')).toContain('install -y --no-install-recommends prometheus |');
});

it('root with apt-get and only chromium missing (the browser test): installs chromium alone', () => {
  const { bin, log, policy } = stubPath({ uid: 0, aptGet: true });
  for (const b of ['redis-server', 'promtool', 'prometheus', 'ruby']) writeFileSync(path.join(bin, b), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  const result = run(bin, policy);
  expect(result.status).toBe(0);
  expect(result.stdout).toContain('installing chromium (for chromium)');
  expect(readFileSync(log, 'utf8')).toContain('install -y --no-install-recommends chromium |');
});

it('root with apt-get and only ruby missing (the Ruby dispatcher test): installs ruby alone', () => {
  const { bin, log, policy } = stubPath({ uid: 0, aptGet: true });
  for (const b of ['redis-server', 'promtool', 'prometheus', 'chromium']) writeFileSync(path.join(bin, b), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  const result = run(bin, policy);
  expect(result.status).toBe(0);
  expect(result.stdout).toContain('installing ruby (for ruby)');
  expect(readFileSync(log, 'utf8')).toContain('install -y --no-install-recommends ruby |');
});
