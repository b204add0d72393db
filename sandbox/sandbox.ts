/**
 * The sandbox (docs/spec.md §9): with no LONGRUN_OWNER_URL, `npm start` runs a simulated owner
 * and a simulated workflow service on loopback in the same process, and points the
 * gateway at them. The banner prints two curls, in the order to paste them: a `curl -N`
 * that follows workflow 1 live (docs/spec.md §14) and waits for its run, then a curl that
 * starts that run, detached (a 202). The gateway also serves the
 * sandbox's web chat page (chat-page.ts), a browser client of the WebSocket route whose runs
 * view follows any run in flight.
 */
import { randomBytes } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Config, EnvConfig } from '../src/config';
import { chatRoutes, chatUrl } from './chat-page';
import { OwnerServiceSimulator, WEBSOCKET_PREAUTH } from './owner-sim';
import { scenarioMetadata } from './scenario';
import { WorkflowServiceSimulator } from './workflow-sim';

export interface Sandbox {
  config: Config;
  owner: OwnerServiceSimulator;
  workflow: WorkflowServiceSimulator;
  /** The sandbox's pages, for the gateway's main listener (GatewayOptions.sandboxRoutes). */
  routes: RequestHandler;
  /** Where the page's runs view reads the runs in flight (the gateway's /runs list), once the gateway started. */
  showRuns(list: () => unknown[]): void;
  /** What `npm start` prints once the gateway listens: a curl to start a run, the chat page. */
  banner(mainUrl: string, opsUrl: string): string;
  close(): Promise<void>;
}

/** What the sandbox's simulators keep of what they saw (recorded.ts). */
export const SANDBOX_RECORD_LIMIT = 200;

/** The actor the sandbox's WebSocket preauth names (ActorID). */
export const SANDBOX_ACTOR = '1';

/** Starts the simulators and returns the gateway's Config pointing at them. */
export async function startSandbox(config: EnvConfig): Promise<Sandbox> {
  const secret = config.owner.secret ?? randomBytes(32);
  // Nobody asserts on what a sandbox records: a short history keeps one left running for days flat.
  const workflow = await WorkflowServiceSimulator.start({ host: '127.0.0.1', recordLimit: SANDBOX_RECORD_LIMIT });
  const owner = await OwnerServiceSimulator.start({
    secret,
    workflowServiceUri: workflow.address,
    host: '127.0.0.1',
    defaults: { detached: true, lockConcurrentFlow: true },
    recordLimit: SANDBOX_RECORD_LIMIT,
  });
  // The WebSocket route's preauth names an actor, as Rails' does: only a start of the same
  // actor may re-attach to a run parked by a lost connection (docs/spec.md §12).
  owner.configure(WEBSOCKET_PREAUTH, { actorId: SANDBOX_ACTOR });
  const runs = { list: (): unknown[] => [] };
  const ownerUrl = new URL(owner.url);
  return {
    // The sandbox's relays go to its owner too (LONGRUN_RELAY_URL is refused with it).
    config: { ...config, owner: { ...config.owner, url: ownerUrl, relayUrl: ownerUrl, secret } },
    owner,
    workflow,
    routes: chatRoutes(runs),
    showRuns: (list) => {
      runs.list = list;
    },
    banner: (mainUrl, opsUrl) =>
      `\nlongrun sandbox is up: gateway ${mainUrl}, ops ${opsUrl}\n` +
      // The follow first: it waits for the run, so the run is seen from its first event on.
      `First, follow workflow 1 live (Server-Sent Events; it waits for the next run, and ends once the workflow is idle):\n\n  ${sandboxFollowCurl(mainUrl)}\n\n` +
      `Then, from another terminal, start a detached run of it: the follow shows every event from its run on, the first checkpoint included:\n\n  ${sandboxCurl(mainUrl)}\n\n` +
      `Or chat over the WebSocket route, and follow any run in flight, in a browser: ${chatUrl(mainUrl)}\n\n` +
      `The runs in flight: curl -s ${opsUrl}/runs\n\n`,
    close: async () => {
      await Promise.allSettled([owner.close(), workflow.close()]);
    },
  };
}

/**
 * The turn the sandbox's curl starts: a checkpoint, a relayed request, then a few seconds
 * of work with a checkpoint every few seconds — time to follow it from the page too, and see
 * it live.
 */
export function sandboxTurn(): { goal: string; workflowMetadata: string } {
  return {
    goal: 'say hello',
    workflowMetadata: scenarioMetadata([
      { op: 'checkpoint', text: 'thinking' },
      { op: 'http', method: 'GET', path: '/api/v4/projects/1' },
      { op: 'wait', ms: 3_000 },
      { op: 'checkpoint', text: 'read the project' },
      { op: 'wait', ms: 3_000 },
      { op: 'checkpoint', text: 'wrote the answer' },
      { op: 'wait', ms: 3_000 },
      { op: 'checkpoint', text: 'done', status: 'FINISHED' },
      { op: 'end' },
    ]),
  };
}

/** A ready-to-paste curl that starts a detached sandbox run (sandboxTurn). */
export function sandboxCurl(mainUrl: string, workflowId = '1'): string {
  return `curl -sS -X POST '${mainUrl}/api/v4/ai/duo_workflows/workflows/${workflowId}/execute' -H 'Content-Type: application/json' --data '${JSON.stringify(sandboxTurn())}'`;
}

/** A ready-to-paste curl that follows that workflow's runs as Server-Sent Events (docs/spec.md §14). */
export function sandboxFollowCurl(mainUrl: string, workflowId = '1'): string {
  return `curl -N '${mainUrl}/api/v4/ai/duo_workflows/workflows/${workflowId}/follow'`;
}
