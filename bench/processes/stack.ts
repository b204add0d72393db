/**
 * One scenario's processes: the simulated workflow service and owner service (each in a
 * process of its own), the gateway (its own process, pointed at them and at the shared
 * redis-server) and a dispatcher client. Redis is flushed first, so every scenario starts
 * from empty keys; close() kills everything it started, in reverse order.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatewayProcess } from './gateway-process';
import { IpcChild } from './ipc';
import { ExecuteClient } from '../clients/load';
import { CpuMeter, type RedisServer } from './procs';
import type { SimQueries } from './sim-protocol';

/** What lives for the whole bench run: redis-server and the shared secret. */
export interface BenchEnv {
  redis: RedisServer;
  secret: Buffer;
  secretFile: string;
  dispose(): void;
}

export function createBenchEnv(redis: RedisServer): BenchEnv {
  const secret = randomBytes(32);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'longrun-bench-'));
  const secretFile = path.join(dir, 'secret');
  // Workhorse's secret-file format: base64 of 32 bytes.
  writeFileSync(secretFile, `${secret.toString('base64')}\n`, { mode: 0o600 });
  return { redis, secret, secretFile, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

export type SimChild = IpcChild<SimQueries>;

export interface Stack {
  workflow: SimChild;
  owner: SimChild;
  gateway: GatewayProcess;
  client: ExecuteClient;
  /** Measures the CPU each process of the stack (and this driver) uses from now on. */
  cpu(): CpuMeter;
  close(): Promise<void>;
}

/** Extra node flags for the simulator processes, for profiling them (e.g. `--cpu-prof`). */
const simNodeArgs = (process.env['BENCH_SIM_NODE_ARGS'] ?? '').split(/\s+/).filter(Boolean);

/** The two simulator processes of a stack. */
export interface Simulators {
  workflow: SimChild;
  owner: SimChild;
  close(): Promise<void>;
}

/** Starts the simulators only (for baselines that need no gateway, or for gateways that share them). */
export async function startSimulators(env: BenchEnv): Promise<Simulators> {
  const secret = env.secret.toString('base64');
  const workflow = await IpcChild.start<SimQueries>('workflow simulator', 'processes/sim-process.js', {
    env: { BENCH_SIM_ROLE: 'workflow', BENCH_SECRET: secret },
    execArgv: simNodeArgs,
  });
  let owner: SimChild;
  try {
    owner = await IpcChild.start<SimQueries>('owner simulator', 'processes/sim-process.js', {
      env: { BENCH_SIM_ROLE: 'owner', BENCH_SECRET: secret, BENCH_WORKFLOW_URI: workflow.address },
      execArgv: simNodeArgs,
    });
  } catch (err) {
    await workflow.stop();
    throw err;
  }
  return {
    workflow,
    owner,
    close: async () => {
      await Promise.allSettled([owner.stop(), workflow.stop()]);
    },
  };
}

export interface StackOptions {
  /** LONGRUN_* variables beyond the ones every scenario sets. */
  gatewayEnv?: Record<string, string>;
  /** Dispatcher connections to the gateway. */
  connections?: number;
  /** Another build's dist/src/main.js for the gateway. */
  mainJs?: string;
  /**
   * Empty Redis first (default true). A second stack beside one already running passes
   * false: flushing would take the first gateway's store marker, and fence its starts.
   */
  flush?: boolean;
  /**
   * Simulators already running (startSimulators), shared with other stacks so that only the
   * gateways differ; the stack does not close them. Default: the stack's own.
   */
  simulators?: Simulators;
}

export async function startStack(env: BenchEnv, options: StackOptions = {}): Promise<Stack> {
  if (options.flush ?? true) await env.redis.flush();
  const shared = options.simulators;
  const sims = shared ?? (await startSimulators(env));
  let gateway: GatewayProcess;
  try {
    gateway = await GatewayProcess.start({
      ownerUrl: sims.owner.address,
      redisUrl: env.redis.url,
      secretFile: env.secretFile,
      env: options.gatewayEnv,
      ...(options.mainJs ? { mainJs: options.mainJs } : {}),
    });
  } catch (err) {
    if (!shared) await sims.close();
    throw err;
  }
  const client = new ExecuteClient(gateway.url, options.connections);
  return {
    workflow: sims.workflow,
    owner: sims.owner,
    gateway,
    client,
    cpu: () => new CpuMeter({ gateway: gateway.pid, owner_sim: sims.owner.pid, workflow_sim: sims.workflow.pid, redis: env.redis.pid, driver: process.pid }).start(),
    close: async () => {
      await client.close().catch(() => undefined);
      await gateway.kill();
      if (!shared) await sims.close();
    },
  };
}
