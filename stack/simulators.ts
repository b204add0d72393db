/**
 * A stack's simulated owner and workflow services (sandbox/), in this process (a test reads
 * what they recorded directly) or each in a process of its own (sim-process.ts: a benchmark's
 * simulators never compete with the gateway or the driver for an event loop; it asks them
 * over IPC). The owner hands out the workflow simulator as the workflow service.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { OwnerServiceSimulator, type PreauthConfig } from '../sandbox/owner-sim';
import { WorkflowServiceSimulator, type WorkflowSimulatorOptions } from '../sandbox/workflow-sim';
import { builtFile } from './child';
import { IpcChild } from './ipc';
import type { SimProcessEnv, SimQueries } from './sim-protocol';

/** Where a piece of a stack runs: in the process that starts it, or in child processes of its own. */
export const PLACES = ['in-process', 'process'] as const;
export type Place = (typeof PLACES)[number];

/** A simulator in a process of its own: asked over IPC (sim-protocol.ts). */
export type SimProcess = IpcChild<SimQueries>;

export interface SimulatorOptions {
  secret: Buffer;
  /** The owner's preauth answer for every workflow (OwnerServiceSimulator `defaults`). */
  preauth?: PreauthConfig;
  /** In processes, only what JSON carries reaches the simulator (no `progress`, no `tls`). */
  workflow?: WorkflowSimulatorOptions;
  /** The host the owner names the workflow service by (a TLS certificate's name); default the simulator's address. */
  workflowHost?: string;
  /** Node flags of the simulator processes (profiling them: BENCH_SIM_NODE_ARGS). */
  nodeArgs?: readonly string[];
}

interface SimulatorsBase<Owner, Workflow> {
  readonly owner: Owner;
  /** The workflow simulator running now (restartWorkflow replaces it). */
  readonly workflow: Workflow;
  /** The simulators' process ids by name (`owner_sim`, `workflow_sim`), for a CpuMeter; none in-process. */
  pids(): Record<string, number>;
  /**
   * Closes the workflow simulator and starts another on its port with the same options
   * (a service restart: the owner's Service.URI stays right), `downMs` after it closed.
   */
  restartWorkflow(options?: { downMs?: number }): Promise<Workflow>;
  /** Closes both; idempotent. */
  close(): Promise<void>;
}

export interface InProcessSimulators extends SimulatorsBase<OwnerServiceSimulator, WorkflowServiceSimulator> {
  readonly where: 'in-process';
}

export interface SimulatorProcesses extends SimulatorsBase<SimProcess, SimProcess> {
  readonly where: 'process';
}

export type Simulators<S extends Place = Place> = S extends 'process' ? SimulatorProcesses : InProcessSimulators;

/** A port just closed may not be free again at once: a restart tries it again for about 2 s. */
const RESTART_ATTEMPTS = 20;
const RESTART_RETRY_MS = 100;

export async function startSimulators<S extends Place>(where: S, options: SimulatorOptions): Promise<Simulators<S>> {
  return (where === 'process' ? startProcesses(options) : startInProcess(options)) as Promise<Simulators<S>>;
}

async function startInProcess(options: SimulatorOptions): Promise<InProcessSimulators> {
  let workflow = await WorkflowServiceSimulator.start(options.workflow);
  let owner: OwnerServiceSimulator;
  try {
    owner = await OwnerServiceSimulator.start({ secret: options.secret, workflowServiceUri: serviceUri(workflow.address, options), defaults: options.preauth ?? {} });
  } catch (err) {
    await workflow.close();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    where: 'in-process',
    owner,
    get workflow() {
      return workflow;
    },
    pids: () => ({}),
    async restartWorkflow({ downMs = 0 } = {}) {
      const { port } = workflow;
      await workflow.close();
      await sleep(downMs);
      workflow = await onFreedPort(() => WorkflowServiceSimulator.start({ ...options.workflow, port }));
      return workflow;
    },
    close: () => (closing ??= Promise.allSettled([owner.close(), workflow.close()]).then(() => undefined)),
  };
}

async function startProcesses(options: SimulatorOptions): Promise<SimulatorProcesses> {
  if (options.workflow?.progress || options.workflow?.tls) throw new Error('simulators in processes: `progress` and `tls` do not cross to them');
  const fork = (role: SimProcessEnv['STACK_SIM_ROLE'], env: Omit<SimProcessEnv, 'STACK_SIM_ROLE' | 'STACK_SIM_SECRET'>): Promise<SimProcess> =>
    IpcChild.start<SimQueries>(`${role} simulator`, builtFile('stack', 'sim-process.js'), {
      env: { STACK_SIM_ROLE: role, STACK_SIM_SECRET: options.secret.toString('base64'), ...env },
      execArgv: options.nodeArgs ?? [],
    });
  const startWorkflow = (port = 0): Promise<SimProcess> => fork('workflow', { STACK_SIM_OPTIONS: JSON.stringify(options.workflow ?? {}), STACK_SIM_PORT: String(port) });
  let workflow = await startWorkflow();
  let owner: SimProcess;
  try {
    owner = await fork('owner', { STACK_SIM_OPTIONS: JSON.stringify(options.preauth ?? {}), STACK_SIM_WORKFLOW_URI: serviceUri(workflow.address, options) });
  } catch (err) {
    await workflow.stop();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    where: 'process',
    owner,
    get workflow() {
      return workflow;
    },
    pids: () => ({ owner_sim: owner.pid, workflow_sim: workflow.pid }),
    async restartWorkflow({ downMs = 0 } = {}) {
      const port = portOf(workflow.address);
      await workflow.stop();
      await sleep(downMs);
      workflow = await onFreedPort(() => startWorkflow(port));
      return workflow;
    },
    close: () => (closing ??= Promise.allSettled([owner.stop(), workflow.stop()]).then(() => undefined)),
  };
}

/** The owner's Service.URI for a workflow simulator at `address` (host:port). */
function serviceUri(address: string, options: SimulatorOptions): string {
  return options.workflowHost === undefined ? address : `${options.workflowHost}:${portOf(address)}`;
}

function portOf(address: string): number {
  return Number(address.slice(address.lastIndexOf(':') + 1));
}

async function onFreedPort<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (attempt >= RESTART_ATTEMPTS) throw err;
      await sleep(RESTART_RETRY_MS);
    }
  }
}
