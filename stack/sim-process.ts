/**
 * A simulator in a process of its own (forked through ipc.ts by simulators.ts), so that the
 * simulated services never compete with the gateway or the load generator for one event
 * loop. Its environment (SimProcessEnv) says which service it is and how it starts. The
 * first IPC message is the simulator's address; then the driver's questions are answered by id.
 */
import { Pool } from 'undici';
import { signJwt, WORKHORSE_ISSUER } from '../src/core/jwt';
import { OwnerServiceSimulator, type PreauthConfig } from '../sandbox/owner-sim';
import { WorkflowServiceSimulator, type CallRecord, type WorkflowSimulatorOptions } from '../sandbox/workflow-sim';
import { serveIpc, type Handlers } from './ipc';
import type { CallAnswers, CallCounts, CallSummary, DirectRelayRequest, DirectRelayResult, SimProcessEnv, SimQueries } from './sim-protocol';

function summarize(call: CallRecord): CallSummary {
  let httpOk = 0;
  for (const { response } of call.actionResponses) {
    const http = response.httpResponse;
    if (http && !http.error && (http.statusCode ?? 0) >= 200 && (http.statusCode ?? 0) < 300) httpOk += 1;
  }
  return {
    workflowId: call.workflowId,
    startedAt: call.startedAt,
    actionsSent: call.actionsSent,
    responses: call.actionResponses.length,
    httpOk,
    stopReasons: call.stopReasons,
    stopReceivedAt: call.stopReceivedAt,
    endedAt: call.ended?.at ?? null,
    endHow: call.ended?.how ?? null,
    endCode: call.ended?.code ?? null,
  };
}

function answersOf(call: CallRecord): CallAnswers {
  return {
    workflowId: call.workflowId,
    goal: call.startRequest.goal ?? '',
    actionsSent: call.actionsSent,
    answered: call.actionResponses.map((r) => r.requestID),
    protocolErrors: call.protocolErrors,
    stopReasons: call.stopReasons,
    endHow: call.ended?.how ?? null,
    endCode: call.ended?.code ?? null,
  };
}

function counts(calls: CallRecord[], open: number): CallCounts {
  const out: CallCounts = { calls: calls.length, open, withAction: 0, ended: 0, stopReasons: {} };
  for (const call of calls) {
    if (call.actionsSent > 0) out.withAction += 1;
    if (call.ended) out.ended += 1;
    const reason = call.stopReasons[0];
    if (reason !== undefined) out.stopReasons[reason] = (out.stopReasons[reason] ?? 0) + 1;
  }
  return out;
}

/** The relay baseline: the same owner API calls longrun makes, made from this process. */
async function directRelay(req: DirectRelayRequest, secret: Buffer): Promise<DirectRelayResult> {
  const pool = new Pool(req.ownerUrl, { connections: req.concurrency, keepAliveTimeout: 30_000 });
  const jwt = await signJwt(secret, WORKHORSE_ISSUER);
  let next = 0;
  let ok = 0;
  const loop = async (): Promise<void> => {
    while (next < req.actions) {
      next += 1;
      const response = await pool.request({
        method: 'GET',
        path: req.path,
        headers: {
          authorization: `Bearer ${req.token}`,
          'content-type': 'application/json',
          'gitlab-workhorse': 'longrun-bench/direct',
          'gitlab-workhorse-api-request': jwt,
          'x-gitlab-duo-workflow-id': 'direct',
          'x-request-id': 'direct',
          'user-agent': 'longrun-bench/direct',
        },
      });
      const body = await response.body.text();
      if (response.statusCode === 200 && body.length > 0) ok += 1;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: req.concurrency }, () => loop()));
  const elapsedMs = performance.now() - started;
  await pool.close();
  return { actions: next, ok, elapsedMs };
}

const setting = (name: keyof SimProcessEnv): string | undefined => process.env[name];

async function start(): Promise<{ address: string; handlers: Handlers<SimQueries> }> {
  const secret = Buffer.from(setting('STACK_SIM_SECRET') ?? '', 'base64');
  if (secret.length !== 32) throw new Error('STACK_SIM_SECRET must be base64 of 32 bytes');
  const role = setting('STACK_SIM_ROLE');
  const options: unknown = JSON.parse(setting('STACK_SIM_OPTIONS') ?? '{}');
  if (role === 'workflow') {
    // STACK_SIM_PORT: a restarted simulator takes its predecessor's port.
    const sim = await WorkflowServiceSimulator.start({ ...(options as WorkflowSimulatorOptions), host: '127.0.0.1', port: Number(setting('STACK_SIM_PORT') ?? 0) });
    const matching = (prefix: string): CallRecord[] => sim.calls.filter((c) => c.workflowId.startsWith(prefix));
    return {
      address: sim.address,
      handlers: {
        calls: ({ prefix }) => matching(prefix).map(summarize),
        callCounts: ({ prefix }) => counts(matching(prefix), sim.openCalls),
        answers: ({ prefix }) => matching(prefix).map(answersOf),
        directRelay: (args) => directRelay(args, secret),
        reset: () => {
          const open = sim.calls.filter((c) => !c.ended);
          sim.calls.splice(0, sim.calls.length, ...open);
          return null;
        },
      },
    };
  }
  if (role === 'owner') {
    const workflowServiceUri = setting('STACK_SIM_WORKFLOW_URI');
    if (!workflowServiceUri) throw new Error('STACK_SIM_WORKFLOW_URI is required for the owner simulator');
    const sim = await OwnerServiceSimulator.start({ secret, workflowServiceUri, host: '127.0.0.1', defaults: options as PreauthConfig });
    return {
      address: sim.url,
      handlers: {
        configure: ({ workflowId, config }) => {
          sim.configure(workflowId, config);
          return null;
        },
        segmentEnds: ({ prefix }) => {
          const out: Record<string, number> = {};
          for (const end of sim.segmentEnds) if (end.workflow_id.startsWith(prefix)) out[end.reason] = (out[end.reason] ?? 0) + 1;
          return out;
        },
        segmentEndTimes: ({ prefix }) => {
          const path = `/api/v4/internal/ai/duo_workflows/workflows/${encodeURIComponent(prefix)}`;
          const times = sim.segmentEndRequests.filter((r) => r.path.startsWith(path)).map((r) => r.at);
          return times.length === 0 ? null : { first: Math.min(...times), last: Math.max(...times) };
        },
        reset: () => {
          sim.preauths.length = 0;
          sim.apiRequests.length = 0;
          sim.segmentEnds.length = 0;
          sim.segmentEndRequests.length = 0;
          return null;
        },
      },
    };
  }
  throw new Error(`STACK_SIM_ROLE must be workflow or owner, got ${JSON.stringify(role)}`);
}

async function main(): Promise<void> {
  const { address, handlers } = await start();
  serveIpc<SimQueries>(address, handlers);
}

main().catch((err: unknown) => {
  process.stderr.write(`sim-process: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
