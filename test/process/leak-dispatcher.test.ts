/**
 * The dispatcher path leaks nothing (issue [26]): a control replica (its heap and structures
 * read from outside, test/helpers/leak.ts) under WORKERS dispatcher workers, each executing
 * detached turns one after another and waiting for the turn's segment-end callback — turns of
 * every end a detached run has: finished, relayed writes and a failed one, cut at the run
 * limit, stopped by the owner, failed by the service, a second execute refused while the
 * workflow is locked. After a warm-up of the same load, its idle heap (compacting
 * collections) is the baseline; after the load it must be back within HEAP_SLACK_MB of it, and
 * every per-run structure — runs, detached slots, run limits (queued ones too), leases, stop
 * watches, callbacks, gRPC streams — back to 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Step } from '../../sandbox/scenario';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';
import { LEAK_NODE_ARGS, controlNodeArgs, heapMb, idleHeap, growth, snapshot, structures, waitIdle } from '../helpers/leak';

const WORKERS = 12;
const WARM_UP_MS = 5_000;
const LOAD_MS = 15_000;
const RUN_LIMIT_MS = 600;
/** How far the idle heap may be from the baseline: V8's compiled code grows by up to a MB as more of the program gets hot (printed apart). */
const HEAP_SLACK_MB = 2;

let stack: Stack<'process'>;
let control: Replica;

/** Kinds of turns, in turn: how each ends (the segment-end reason the owner is called back with). */
const kinds = ['finished', 'relayed', 'run_limit', 'stopped', 'failed', 'locked'] as const;
type Kind = (typeof kinds)[number];

function steps(kind: Kind): Step[] {
  switch (kind) {
    case 'finished':
      return [{ op: 'checkpoint', text: 'one' }, { op: 'checkpoint', text: 'two', status: 'FINISHED' }, { op: 'end' }];
    case 'relayed':
      return [
        { op: 'http', method: 'POST', path: '/api/v4/echo' },
        { op: 'http', method: 'GET', path: '/api/v4/projects/1' },
        { op: 'http', method: 'GET', path: '//elsewhere.example/escape' },
        { op: 'checkpoint', text: 'relayed', status: 'FINISHED' },
        { op: 'end' },
      ];
    case 'run_limit':
      return [{ op: 'checkpoint', text: 'long' }, { op: 'hang' }];
    case 'stopped':
    case 'locked':
      return [{ op: 'checkpoint', text: 'waiting' }, { op: 'wait', ms: 5_000 }, { op: 'end' }];
    case 'failed':
      return [
        { op: 'checkpoint', text: 'then fails' },
        { op: 'fail', code: 'UNAVAILABLE', message: 'the service went away' },
      ];
  }
}

interface Load {
  turns: number;
  accepted: number;
  refused: Record<string, number>;
}

/** One turn: the execute, what the kind asks of the owner meanwhile, and its segment-end callback. */
async function oneTurn(id: string, kind: Kind, load: Load): Promise<void> {
  load.turns += 1;
  const answer = await control.execute(id, steps(kind));
  if (answer.status !== 202) {
    load.refused[answer.status] = (load.refused[answer.status] ?? 0) + 1;
    return;
  }
  load.accepted += 1;
  const runId = answer.body['run_id'];
  if (kind === 'stopped') expect((await control.stop(id, undefined, { reason: 'USER_STOPPED' })).status).toBe(202);
  if (kind === 'locked') {
    // A second execute while the first holds the workflow: refused, nothing taken; then the owner stops the first.
    expect((await control.execute(id, steps('finished'))).status).toBe(409);
    await control.stop(id);
  }
  const { owner } = stack;
  await owner.waitFor(() => owner.segmentEnds.some((end) => end.run_id === runId), 15_000, `the segment end of ${id}`);
}

async function load(forMs: number, prefix: string, load: Load): Promise<void> {
  const until = Date.now() + forMs;
  let next = 0;
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      await sleep((w * 200) / WORKERS);
      while (Date.now() < until) {
        const n = next++;
        await oneTurn(`${prefix}${n}`, kinds[n % kinds.length] as Kind, load);
      }
    }),
  );
}

beforeAll(async () => {
  stack = await startStack({
    gateway: 'process',
    replicas: 0,
    redis: 'own',
    preauth: { detached: true, lockConcurrentFlow: true },
    env: { LONGRUN_RUN_LIMIT_MS: String(RUN_LIMIT_MS), LONGRUN_LEASE_TTL_MS: '3000', LONGRUN_STOP_ACK_TIMEOUT_MS: '1000', LONGRUN_STOP_POLL_MS: '200' },
    children: { nodeArgs: LEAK_NODE_ARGS },
  });
  control = await stack.startReplica({ name: 'leak-dispatch', nodeArgs: controlNodeArgs() });
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

describe('the dispatcher path under many detached turns', () => {
  it("the replica's heap returns to where it started once idle, and it holds nothing — through finished, limited, stopped, failed and refused turns", async () => {
    const warm: Load = { turns: 0, accepted: 0, refused: {} };
    await load(WARM_UP_MS, 'leak-warm-', warm);
    expect.soft(await waitIdle(control, 15_000), 'held once the warm-up is over').toEqual({});
    const baseline = await idleHeap(control);
    await snapshot(control);

    const soak: Load = { turns: 0, accepted: 0, refused: {} };
    const trend: number[] = [];
    const sampling = (async () => {
      for (let t = 5_000; t < LOAD_MS; t += 5_000) {
        await sleep(5_000);
        trend.push(await heapMb(control));
      }
    })();
    await load(LOAD_MS, 'leak-', soak);
    await sampling;

    const held = await waitIdle(control, 20_000);
    const idle = await idleHeap(control);
    await snapshot(control);
    const ends: Record<string, number> = {};
    for (const end of stack.owner.segmentEnds) ends[end.reason] = (ends[end.reason] ?? 0) + 1;
    const pooled = await structures(control).then(
      (s) => JSON.stringify(s.pooled),
      () => 'n/a',
    );
    console.log(
      `dispatcher control: idle heap after the warm-up (${warm.turns} turns) and after the load: ${growth(baseline, idle)} ` +
        `(${soak.turns} turns, ${soak.accepted} accepted, refused ${JSON.stringify(soak.refused)}; segment ends ${JSON.stringify(ends)}); ` +
        `under load ${trend.map((mb) => mb.toFixed(2)).join(', ')} MB; still held ${JSON.stringify(held)}; pooled ${pooled}`,
    );
    expect(soak.accepted, 'turns accepted').toBeGreaterThan(WORKERS * 5);
    for (const reason of ['finished', 'run_limit', 'stop_requested']) expect(ends[reason] ?? 0, `segment ends ${reason}`).toBeGreaterThan(0);
    expect((ends['stream_error'] ?? 0) + (ends['workflow_unavailable'] ?? 0), 'segment ends of a failed call').toBeGreaterThan(0);
    expect(idle.mb - baseline.mb, `idle heap after the load against after the warm-up: ${growth(baseline, idle)}`).toBeLessThan(HEAP_SLACK_MB);
    expect(held, 'structures still holding entries').toEqual({});
  }, 90_000);
});
