/**
 * Gateway replicas as child processes (`node dist/src/main.js`, as users run it), all
 * pointed at one owner simulator, one workflow simulator and one redis-server.
 */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request, type Dispatcher } from 'undici';
import { signOwnerJwt } from '../../src/core/jwt';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { startChild, type Child } from './child';
import { freePort } from './ports';
import { testSecret } from './secret';

export interface Replica {
  name: string;
  url: string;
  opsUrl: string;
  child: Child;
  execute(workflowId: string, steps: Step[]): Promise<{ status: number; headers: Dispatcher.ResponseData['headers']; body: Record<string, unknown> }>;
  stop(workflowId: string, token?: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }>;
  runRecord(workflowId: string): Promise<{ status: number; body: Record<string, unknown> }>;
}

const root = path.resolve(__dirname, '../..');
/**
 * The gateway the replicas run: this checkout's build, or another build's entry point
 * (LONGRUN_TEST_GATEWAY_MAIN), to measure a fault test against an older gateway.
 */
const gatewayMain = process.env['LONGRUN_TEST_GATEWAY_MAIN'] ?? path.join(root, 'dist/src/main.js');

/** An owner token for the internal routes of `workflowId` (docs/spec.md §6). */
export async function ownerJwt(workflowId: string): Promise<string> {
  return signOwnerJwt(testSecret, workflowId);
}

async function json(res: Dispatcher.ResponseData): Promise<Record<string, unknown>> {
  const text = await res.body.text();
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { raw: text };
  }
}

/**
 * A port from freePort can be taken by another process before the replica binds it (the
 * suite's files run in parallel): a replica that exits on EADDRINUSE is started again on
 * other ports, a few times. `nodeArgs`: node flags before the entry point (e.g. --expose-gc,
 * which mounts the ops listener's /debug/gc and /debug/structures).
 */
export async function startReplica(name: string, env: Record<string, string>, nodeArgs: readonly string[] = []): Promise<Replica> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startReplicaOnce(name, env, nodeArgs);
    } catch (err) {
      if (attempt >= 3 || !(err instanceof AddressInUse)) throw err;
    }
  }
}

class AddressInUse extends Error {}

async function startReplicaOnce(name: string, env: Record<string, string>, nodeArgs: readonly string[]): Promise<Replica> {
  const port = await freePort();
  const opsPort = await freePort();
  const child = startChild([...nodeArgs, gatewayMain], {
    LONGRUN_LISTEN: `127.0.0.1:${port}`,
    LONGRUN_OPS_LISTEN: `127.0.0.1:${opsPort}`,
    LONGRUN_REPLICA_ID: name,
    LONGRUN_LOG_LEVEL: 'warn',
    ...env,
  });
  const url = `http://127.0.0.1:${port}`;
  const opsUrl = `http://127.0.0.1:${opsPort}`;
  // Generous: a loaded 2-core machine starting several replicas at once takes its time.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await request(`${opsUrl}/-/readiness`).then(
      async (r) => (await r.body.text(), r.statusCode === 200),
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline || child.process.exitCode !== null) {
      await child.kill();
      const message = `replica ${name} did not become ready\n${child.stdout()}\n${child.stderr()}`;
      throw child.stderr().includes('EADDRINUSE') ? new AddressInUse(message) : new Error(message);
    }
    await sleep(50);
  }
  return {
    name,
    url,
    opsUrl,
    child,
    async execute(workflowId, steps) {
      const res = await request(`${url}/api/v4/ai/duo_workflows/workflows/${workflowId}/execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ workflowMetadata: scenarioMetadata(steps) }),
      });
      return { status: res.statusCode, headers: res.headers, body: await json(res) };
    },
    async stop(workflowId, token, body) {
      const res = await request(`${url}/internal/workflows/${workflowId}/stop`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token === undefined ? { authorization: `Bearer ${await ownerJwt(workflowId)}` } : token ? { authorization: token } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.statusCode, body: await json(res) };
    },
    async runRecord(workflowId) {
      const res = await request(`${url}/internal/workflows/${workflowId}/run`, { headers: { authorization: `Bearer ${await ownerJwt(workflowId)}` } });
      return { status: res.statusCode, body: await json(res) };
    },
  };
}

/**
 * The replicas of one test file. `start(n, env)` starts `n` together, named
 * `<prefix>-a`, `<prefix>-b`, …, each with the file's settings (read at start: servers the
 * file starts in beforeAll) and the test's `env` over them; `killAll()`, in the file's
 * afterEach, kills every replica started since, those of a start that failed part-way
 * included.
 */
export class Replicas {
  private readonly started: Replica[] = [];

  constructor(
    private readonly prefix: string,
    private readonly settings: () => Record<string, string>,
  ) {}

  async start(n: number, env: Record<string, string> = {}): Promise<Replica[]> {
    const results = await Promise.allSettled(Array.from({ length: n }, (_, i) => startReplica(`${this.prefix}-${String.fromCharCode(97 + i)}`, { ...this.settings(), ...env })));
    const up = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    this.started.push(...up);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    return up;
  }

  async killAll(): Promise<void> {
    await Promise.allSettled(this.started.splice(0).map((r) => r.child.kill()));
  }
}

/**
 * The store fence's work as the replicas' metrics count it: acquires and renewals that ended
 * with `result` (`fenced`: starts refused while it was up; `reasserted`: locks taken back).
 */
export async function lockOperations(replicas: readonly Replica[], result: 'fenced' | 'reasserted'): Promise<number> {
  let total = 0;
  for (const replica of replicas) {
    const text = await (await request(`${replica.opsUrl}/metrics`)).body.text();
    for (const op of ['acquire', 'renew']) total += Number(new RegExp(`^longrun_lock_operations_total\\{op="${op}",result="${result}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  }
  return total;
}
