/**
 * A sandbox left running holds flat memory (issue [21]): its simulators keep a bounded
 * history of what they saw (sandbox/recorded.ts), so 10 000 turns through the gateway leave
 * the process the size it was after the first 2 000 — where simulators that kept every call,
 * preauth and callback grew by tens of megabytes. Measured after a full GC, not timed.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { Gateway } from '../../src/gateway';
import { SANDBOX_RECORD_LIMIT, startSandbox, type Sandbox } from '../../sandbox/sandbox';
import { scenarioMetadata } from '../../sandbox/scenario';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const TURNS = 10_000;
const WARM_UP = 2_000;
const CONCURRENCY = 16;

let sandbox: Sandbox;
let gateway: Gateway;
const agent = new Agent({ connections: CONCURRENCY });

beforeAll(async () => {
  sandbox = await startSandbox(loadConfig({ LONGRUN_LISTEN: '127.0.0.1:0', LONGRUN_OPS_LISTEN: '127.0.0.1:0', LONGRUN_LOG_LEVEL: 'silent' }));
  gateway = await Gateway.start(sandbox.config, { logger: createLogger('silent'), sandboxRoutes: sandbox.routes });
});

afterAll(async () => {
  await gateway?.close();
  await sandbox?.close();
  await agent.close();
});

/** Runs turns `from`..`to` (each workflow once: a detached turn that ends at once), CONCURRENCY at a time. */
async function turns(from: number, to: number): Promise<void> {
  const body = JSON.stringify({ goal: 'g', workflowMetadata: scenarioMetadata([{ op: 'checkpoint', text: 'done', status: 'FINISHED' }, { op: 'end' }]) });
  let next = from;
  const worker = async (): Promise<void> => {
    while (next < to) {
      const id = String(next++);
      const res = await request(`${gateway.mainUrl}/api/v4/ai/duo_workflows/workflows/${id}/execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        dispatcher: agent,
      });
      await res.body.dump();
      expect([200, 202]).toContain(res.statusCode);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  // Every run ended and was called back (the last ones a moment after their 202).
  await sandbox.owner.waitFor(() => gateway.registry.size === 0, 30_000, 'every run ended');
}

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

describe('a sandbox left running', () => {
  it(`holds flat memory through ${TURNS} turns: its simulators keep a bounded history`, async () => {
    await turns(0, WARM_UP);
    const warm = heapAfterGc();
    await turns(WARM_UP, TURNS);
    const after = heapAfterGc();
    // Bounded: the latest few hundred of each, not one entry per turn.
    const kept = SANDBOX_RECORD_LIMIT + Math.ceil(SANDBOX_RECORD_LIMIT / 10);
    expect(sandbox.workflow.calls.length).toBeLessThanOrEqual(kept);
    expect(sandbox.owner.preauths.length).toBeLessThanOrEqual(kept);
    expect(sandbox.owner.segmentEnds.length).toBeLessThanOrEqual(kept);
    expect(sandbox.owner.segmentEndRequests.length).toBeLessThanOrEqual(kept);
    // The latest turns are the ones kept.
    expect(sandbox.workflow.calls.at(-1)?.workflowId).toBe(String(TURNS - 1));
    // 8 000 more turns: kept, each had cost a call record, a preauth and a callback (well over 2 KB).
    const grewKiB = (after - warm) / 1024;
    console.log(`sandbox heap after ${WARM_UP} turns ${(warm / 1048576).toFixed(1)} MiB, after ${TURNS} ${(after / 1048576).toFixed(1)} MiB (${grewKiB.toFixed(0)} KiB)`);
    expect(grewKiB).toBeLessThan(4 * 1024);
  }, 300_000);
});
