/**
 * @longrun/client as a dispatcher gets it: `npm pack` in packages/client, the tarball
 * installed into an empty folder outside the repository with `npm install --offline`
 * (from the npm cache `npm ci` filled), and from that folder a script that requires the
 * package starts a detached run on the built gateway (`node dist/src/main.js` with no
 * LONGRUN_OWNER_URL: the sandbox, whose printed curl carries a scenario) and gets its 202.
 * The tarball holds the built client only, and installs none of the gateway's dependencies;
 * a TypeScript consumer gets its types from it; the gateway that served the run loaded none
 * of it; the repository resolves the package through its workspace link, and the gateway's
 * package no longer exports a client.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromRoot } from '../../src/core/paths';
import { startChild, type Child } from '../../stack/child';

const packageDir = fromRoot('packages/client');
const clientPackage = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as { version: string; dependencies: Record<string, string> };

/** What the gateway's own package depends on and a client must not bring along. */
const gatewayOnly = ['@grpc/grpc-js', '@grpc/proto-loader', '@modelcontextprotocol/sdk', 'express', 'ioredis', 'pino', 'prom-client', 'protobufjs'];

interface LockEntry {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  [field: string]: unknown;
}

/**
 * A package-lock.json naming the client's dependency tree as the repository's lock pins it
 * (versions and integrity), for the consumer folder. npm resolves a range from the
 * registry's full package documents, which `npm ci` never caches (it installs from the lock),
 * so `npm install --offline` finds each dependency pinned here and fetches only its tarball,
 * from the cache. A dependency the package names that the repository's lock lacks fails
 * the install, as it would fail `npm ci` here.
 */
function consumerLock(): unknown {
  const lock = JSON.parse(readFileSync(fromRoot('package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  const packages: Record<string, LockEntry> = {};
  // Where Node would find `name` from the package at `from`: its own node_modules, then each one above.
  const locate = (from: string, name: string): string => {
    for (let base = from; ;) {
      const at = base ? `${base}/node_modules/${name}` : `node_modules/${name}`;
      if (lock.packages[at]) return at;
      if (!base) throw new Error(`${name} (a dependency of ${from}) is not in package-lock.json`);
      const cut = base.lastIndexOf('/node_modules/');
      base = cut >= 0 ? base.slice(0, cut) : '';
    }
  };
  const visit = (from: string): void => {
    const entry = lock.packages[from] as LockEntry;
    const peers = Object.keys(entry.peerDependencies ?? {}).filter((name) => !entry.peerDependenciesMeta?.[name]?.optional);
    for (const name of [...Object.keys(entry.dependencies ?? {}), ...Object.keys(entry.optionalDependencies ?? {}), ...peers]) {
      const at = locate(from, name);
      const into = at.replace(/^packages\/client\//, 'node_modules/@longrun/client/');
      if (packages[into]) continue;
      // dev, optional and peer say how the repository's root reaches a package, not the consumer.
      const pinned = { ...lock.packages[at] };
      for (const flag of ['dev', 'devOptional', 'optional', 'peer']) delete pinned[flag];
      packages[into] = pinned;
      visit(at);
    }
  };
  visit('packages/client');
  return { name: 'consumer', lockfileVersion: 3, requires: true, packages: { '': { name: 'consumer' }, ...packages } };
}

/** Package names installed under `nodeModules` (scoped ones as @scope/name). */
function installed(nodeModules: string): string[] {
  return readdirSync(nodeModules)
    .filter((name) => !name.startsWith('.'))
    .flatMap((name) => (name.startsWith('@') ? readdirSync(path.join(nodeModules, name)).map((inner) => `${name}/${inner}`) : [name]))
    .sort();
}

function npm(args: string[], cwd: string): string {
  return execFileSync('npm', [...args, '--no-audit', '--no-fund'], { cwd, encoding: 'utf8', timeout: 180_000, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** tsc --strict on `file` as a node16 consumer; its output when it fails. */
function tsc(file: string, cwd: string): { ok: boolean; out: string } {
  try {
    const out = execFileSync(
      process.execPath,
      [require.resolve('typescript/bin/tsc'), '--noEmit', '--strict', '--module', 'node16', '--moduleResolution', 'node16', '--types', 'node', file],
      { cwd, encoding: 'utf8' },
    );
    return { ok: true, out };
  } catch (err) {
    return { ok: false, out: String((err as { stdout?: string }).stdout ?? err) };
  }
}

let dir: string;
let consumer: string;
let packed: { filename: string; files: Array<{ path: string }> };
let gateway: Child | undefined;
let gatewayUrl: string;
let sandboxStart: { goal: string; workflowMetadata: string };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'longrun-client-package-'));
  consumer = path.join(dir, 'consumer');
  // prepack builds the package first, so the tarball holds this tree's client.
  [packed] = JSON.parse(npm(['pack', '--json', '--pack-destination', dir], packageDir)) as [typeof packed];
  mkdirSync(consumer);
  writeFileSync(path.join(consumer, 'package.json'), `${JSON.stringify({ name: 'consumer', private: true }, null, 2)}\n`);
  writeFileSync(path.join(consumer, 'package-lock.json'), `${JSON.stringify(consumerLock(), null, 2)}\n`);
  npm(['install', '--offline', path.join(dir, packed.filename)], consumer);

  // Preloaded: at exit, the gateway writes every module it loaded to LONGRUN_TEST_LOADED_FILE.
  gateway = startChild(['-r', fromRoot('test/fixtures/loaded-modules.cjs'), fromRoot('dist/src/main.js')], {
    LONGRUN_TEST_LOADED_FILE: path.join(dir, 'loaded.txt'),
    LONGRUN_LISTEN: '127.0.0.1:0',
    LONGRUN_OPS_LISTEN: '127.0.0.1:0',
    LONGRUN_OWNER_URL: '',
    LONGRUN_REDIS_URL: '',
    LONGRUN_LOG_LEVEL: 'warn',
  });
  gatewayUrl = (await gateway.waitForOutput(/sandbox is up: gateway (http:\/\/\S+),/, 20_000))[1] as string;
  const [, curl] = await gateway.waitForOutput(/^\s*(curl -sS -X POST .+)$/m, 1_000);
  sandboxStart = JSON.parse(/--data '(.+)'$/.exec(curl as string)?.[1] as string) as typeof sandboxStart;
}, 300_000);

afterAll(async () => {
  await gateway?.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the packed client, installed where nothing of the gateway is', () => {
  it('the tarball holds the built client (code and declarations), its package.json and README, no source or test', () => {
    const files = packed.files.map((f) => f.path).sort();
    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md']));
    for (const entry of ['index', 'express']) expect(files).toEqual(expect.arrayContaining([`dist/${entry}.js`, `dist/${entry}.d.ts`]));
    expect(files.filter((f) => f !== 'package.json' && f !== 'README.md' && !/^dist\/[\w-]+\.(js|d\.ts)$/.test(f))).toEqual([]);
  });

  it('installs from the npm cache with its own dependencies only, each one used, none of the gateway’s', () => {
    const modules = installed(path.join(consumer, 'node_modules'));
    for (const name of gatewayOnly) expect(modules).not.toContain(name);
    expect(modules).toEqual(expect.arrayContaining(['@longrun/client', ...Object.keys(clientPackage.dependencies)]));
    // What the built code requires, besides Node's own modules and its own files, is what it depends on (less the types packages).
    const dist = path.join(consumer, 'node_modules/@longrun/client/dist');
    const required = new Set(
      readdirSync(dist)
        .filter((f) => f.endsWith('.js'))
        .flatMap((f) => [...readFileSync(path.join(dist, f), 'utf8').matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1] as string))
        .filter((id) => !id.startsWith('.') && !id.startsWith('node:')),
    );
    expect([...required].sort()).toEqual(Object.keys(clientPackage.dependencies).filter((name) => !name.startsWith('@types/')));
  });

  it('a script in that folder requires @longrun/client and starts a detached run on the sandbox gateway: 202 accepted', () => {
    const script = path.join(consumer, 'execute.cjs');
    writeFileSync(
      script,
      [
        `const { LongrunClient, version } = require('@longrun/client');`,
        `const [url, workflowId, start] = process.argv.slice(2);`,
        `const client = new LongrunClient({ url, retry: { maxAttempts: 1 } });`,
        `client.execute(workflowId, JSON.parse(start)).then(`,
        `  async (result) => {`,
        `    console.log(JSON.stringify({ kind: result.kind, runId: result.runId, acceptedOn: result.acceptedOn, version, from: require.resolve('@longrun/client') }));`,
        `    await client.close();`,
        `  },`,
        `  (err) => { console.error(err); process.exitCode = 1; },`,
        `);`,
        '',
      ].join('\n'),
    );
    const out = execFileSync(process.execPath, [script, gatewayUrl, '1', JSON.stringify(sandboxStart)], { cwd: consumer, encoding: 'utf8', timeout: 30_000 });
    const result = JSON.parse(out) as { kind: string; runId: string; acceptedOn: string; version: string; from: string };
    expect(result).toMatchObject({ kind: 'accepted', version: clientPackage.version, from: path.join(consumer, 'node_modules/@longrun/client/dist/index.js') });
    expect(result.runId).toMatch(/^[0-9a-f-]{36}$/);
    expect(['first_action', 'accept_wait_elapsed']).toContain(result.acceptedOn);
  });

  it('a TypeScript consumer there gets its types from the package, without Express’s (and a misuse does not compile)', () => {
    const consumerTs = (body: string): string => {
      const file = path.join(consumer, 'consumer.ts');
      writeFileSync(
        file,
        `import { LongrunClient, isResumable, type ExecuteResult, type SegmentEnd } from '@longrun/client';\n` +
          `const client = new LongrunClient({ url: 'http://127.0.0.1:8181' });\n` +
          `export async function run(end: SegmentEnd): Promise<string> {\n${body}\n}\n`,
      );
      return file;
    };
    expect(installed(path.join(consumer, 'node_modules'))).not.toContain('@types/express');
    const good = tsc(
      consumerTs(`  const result: ExecuteResult = await client.execute('1');\n  return result.kind === 'accepted' ? result.runId : String(isResumable(end.reason));`),
      consumer,
    );
    expect(good.out).toBe('');
    expect(good.ok).toBe(true);
    const bad = tsc(consumerTs(`  const result = await client.execute('1');\n  return result.runId;`), consumer);
    expect(bad.ok).toBe(false);
    expect(bad.out).toMatch(/Property 'runId' does not exist/);
  }, 120_000);

  it('the gateway that served the run loaded no module of the client package (it shares its types only)', async () => {
    const served = gateway as Child;
    served.process.kill('SIGTERM');
    expect(await served.exited(15_000)).toBe(0);
    const loaded = readFileSync(path.join(dir, 'loaded.txt'), 'utf8').split('\n');
    expect(loaded.some((f) => f === fromRoot('dist/src/gateway.js'))).toBe(true);
    expect(loaded.filter((f) => f.startsWith(packageDir) || f.includes(`${path.sep}@longrun${path.sep}`))).toEqual([]);
  });
});

describe('the package in the repository', () => {
  it('@longrun/client/express has its own types, with Express’s where they are installed (here, the repository)', () => {
    // Inside the repository, so the package resolves through the workspace link and its exports.
    const scratch = mkdtempSync(fromRoot('.consumer-'));
    try {
      const file = path.join(scratch, 'consumer.ts');
      writeFileSync(
        file,
        `import express from 'express';\nimport { segmentEndMiddleware, segmentEndOf } from '@longrun/client/express';\n` +
          `express().post('/segment_end', segmentEndMiddleware({ secret: new Uint8Array(32) }), (_req, res) => void res.json(segmentEndOf(res).reason));\n`,
      );
      const result = tsc(file, fromRoot());
      expect(result.out).toBe('');
      expect(result.ok).toBe(true);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 120_000);

  it('require("@longrun/client") resolves to the built package through the workspace link; the gateway’s main entry is unchanged and exports no client', () => {
    const out = execFileSync(
      process.execPath,
      [
        '-e',
        "const c = require('@longrun/client'); let gone; try { require.resolve('longrun/client') } catch (e) { gone = e.code } console.log(require.resolve('@longrun/client'), typeof c.LongrunClient, typeof c.verifySegmentEnd, require.resolve('longrun'), gone)",
      ],
      { cwd: fromRoot(), encoding: 'utf8' },
    ).trim();
    expect(out).toBe(`${fromRoot('packages/client/dist/index.js')} function function ${fromRoot('dist/src/main.js')} ERR_PACKAGE_PATH_NOT_EXPORTED`);
  });
});
