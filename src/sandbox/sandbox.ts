/**
 * The sandbox (docs/spec.md §9): with no LONGRUN_OWNER_URL, `npm start` runs a simulated owner
 * and a simulated workflow service on loopback in the same process, and points the
 * gateway at them. Runs are detached by default, so the printed curl returns a 202.
 */
import { randomBytes } from 'node:crypto';
import type { Config, EnvConfig } from '../config';
import { OwnerServiceSimulator } from './owner-sim';
import { scenarioMetadata } from './scenario';
import { WorkflowServiceSimulator } from './workflow-sim';

export interface Sandbox {
  config: Config;
  owner: OwnerServiceSimulator;
  workflow: WorkflowServiceSimulator;
  close(): Promise<void>;
}

/** Starts the simulators and returns the gateway's Config pointing at them. */
export async function startSandbox(config: EnvConfig): Promise<Sandbox> {
  const secret = config.secret ?? randomBytes(32);
  const workflow = await WorkflowServiceSimulator.start({ host: '127.0.0.1' });
  const owner = await OwnerServiceSimulator.start({
    secret,
    workflowServiceUri: workflow.address,
    host: '127.0.0.1',
    defaults: { detached: true, lockConcurrentFlow: true },
  });
  return {
    config: { ...config, ownerUrl: new URL(owner.url), secret },
    owner,
    workflow,
    close: async () => {
      await Promise.allSettled([owner.close(), workflow.close()]);
    },
  };
}

/** A ready-to-paste curl that starts a detached sandbox run with a small scenario. */
export function sandboxCurl(mainUrl: string, workflowId = '1'): string {
  const body = JSON.stringify({
    goal: 'say hello',
    workflowMetadata: scenarioMetadata([
      { op: 'checkpoint', text: 'thinking' },
      { op: 'http', method: 'GET', path: '/api/v4/projects/1' },
      { op: 'wait', ms: 2_000 },
      { op: 'checkpoint', text: 'done', status: 'FINISHED' },
      { op: 'end' },
    ]),
  });
  return `curl -sS -X POST '${mainUrl}/api/v4/ai/duo_workflows/workflows/${workflowId}/execute' -H 'Content-Type: application/json' --data '${body}'`;
}
