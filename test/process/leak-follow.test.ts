/**
 * Following runs leaks nothing (issue [26]): a control replica (its heap and structures read
 * from outside, test/helpers/leak.ts) and a second one on one redis-server, detached turns of
 * WORKFLOWS workflows running one after another on either, and FOLLOWERS clients each opening
 * a follow of a random workflow on the control, reading it a moment and dropping it, again
 * and again — half of them resuming by Last-Event-ID — so the control follows runs of its own
 * and runs of the other replica (through Redis), and its feeds, interest and reporters come
 * and go. After a warm-up of the same load, its idle heap (compacting collections) is the
 * baseline; after the load, once interest in every workflow has lapsed, it must be back
 * within HEAP_SLACK_MB of it, and every structure of the follow feature back to 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Step } from '../../sandbox/scenario';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';
import { LEAK_NODE_ARGS, controlNodeArgs, heapMb, idleHeap, growth, snapshot, structures, waitIdle } from '../helpers/leak';
import { openSse } from '../helpers/sse';

/** The follow route of a workflow (docs/spec.md §14): the one place this test names it. */
const FOLLOW_PATH = (workflowId: string): string => `/api/v4/ai/duo_workflows/workflows/${workflowId}/follow`;

const WORKFLOWS = 6;
const FOLLOWERS = 12;
const WARM_UP_MS = 4_000;
const LOAD_MS = 12_000;
/** How long a follow is read before it is dropped. */
const FOLLOW_MIN_MS = 150;
const FOLLOW_MAX_MS = 900;
/** How far the idle heap may be from the baseline: V8's compiled code grows by up to a MB as more of the program gets hot (printed apart). */
const HEAP_SLACK_MB = 2;
/** Interest lapses 10 s after a replica's last announcement (INTEREST_TTL_MS); feeds and reporters go with it. */
const LAPSE_MS = 25_000;

const turn: Step[] = [
  {
    op: 'repeat',
    times: 8,
    steps: [
      { op: 'checkpoint', text: 'step' },
      { op: 'http', method: 'POST', path: '/api/v4/echo' },
      { op: 'wait', ms: 60 },
    ],
  },
  { op: 'checkpoint', text: 'done', status: 'FINISHED' },
  { op: 'end' },
];

let stack: Stack<'process'>;
let control: Replica;
let other: Replica;

interface Load {
  follows: number;
  events: number;
  refused: Record<string, number>;
  turns: number;
}

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;
const workflowId = (i: number): string => `${77_000 + i}`;

/** Detached turns of every workflow, one after another, each on either replica, until `until`. */
async function dispatch(until: number, load: Load): Promise<void> {
  await Promise.all(
    Array.from({ length: WORKFLOWS }, async (_, i) => {
      while (Date.now() < until) {
        const answer = await pick([control, other]).execute(workflowId(i), turn);
        load.turns += 1;
        if (answer.status !== 202) {
          // Locked (the last turn's release on its way) or finished before acceptance: the next one goes.
          await sleep(50);
          continue;
        }
        const runId = answer.body['run_id'];
        const { owner } = stack;
        await owner.waitFor(() => owner.segmentEnds.some((end) => end.run_id === runId), 15_000, `the segment end of ${workflowId(i)}`);
      }
    }),
  );
}

/** Followers opening, reading and dropping follows on the control until `until`. */
async function follow(until: number, load: Load): Promise<void> {
  await Promise.all(
    Array.from({ length: FOLLOWERS }, async (_, f) => {
      let last: number | undefined;
      while (Date.now() < until) {
        const resume = f % 2 === 0 && last !== undefined ? { 'last-event-id': String(last) } : undefined;
        const stream = await openSse(`${control.url}${FOLLOW_PATH(workflowId(Math.floor(Math.random() * WORKFLOWS)))}`, resume);
        load.follows += 1;
        if (stream.status !== 200) {
          load.refused[stream.status] = (load.refused[stream.status] ?? 0) + 1;
          await sleep(50);
          continue;
        }
        await sleep(FOLLOW_MIN_MS + Math.random() * (FOLLOW_MAX_MS - FOLLOW_MIN_MS));
        stream.close();
        await stream.closed;
        load.events += stream.events.length;
        last = stream.events.at(-1)?.id ?? last;
      }
    }),
  );
}

async function run(forMs: number, load: Load): Promise<void> {
  const until = Date.now() + forMs;
  await Promise.all([dispatch(until, load), follow(until, load)]);
}

beforeAll(async () => {
  stack = await startStack({
    gateway: 'process',
    replicas: 0,
    redis: 'own',
    preauth: { detached: true, lockConcurrentFlow: true },
    env: { LONGRUN_LEASE_TTL_MS: '3000', LONGRUN_STOP_ACK_TIMEOUT_MS: '1000', LONGRUN_FOLLOW_IDLE_MS: '2000', LONGRUN_FOLLOW_KEEPALIVE_MS: '500' },
    children: { nodeArgs: LEAK_NODE_ARGS },
  });
  [control, other] = await Promise.all([stack.startReplica({ name: 'leak-follow-control', nodeArgs: controlNodeArgs() }), stack.startReplica({ name: 'leak-follow-other' })]);
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

describe('following runs, a follow opened and dropped again and again', () => {
  it("the replica's heap returns to where it started once idle, and it holds no follower, feed, interest or reporter", async () => {
    const warm: Load = { follows: 0, events: 0, refused: {}, turns: 0 };
    await run(WARM_UP_MS, warm);
    expect.soft(await waitIdle(control, LAPSE_MS), 'held once the warm-up is over').toEqual({});
    const baseline = await idleHeap(control);
    await snapshot(control);

    const soak: Load = { follows: 0, events: 0, refused: {}, turns: 0 };
    const trend: number[] = [];
    const sampling = (async () => {
      for (let t = 5_000; t < LOAD_MS; t += 5_000) {
        await sleep(5_000);
        trend.push(await heapMb(control));
      }
    })();
    await run(LOAD_MS, soak);
    await sampling;

    const held = await waitIdle(control, LAPSE_MS);
    const idle = await idleHeap(control);
    await snapshot(control);
    const pooled = await structures(control).then(
      (s) => JSON.stringify(s.pooled),
      () => 'n/a',
    );
    console.log(
      `follow control: idle heap after the warm-up (${warm.follows} follows) and after the load: ${growth(baseline, idle)} ` +
        `(${soak.follows} follows, ${soak.events} events, refused ${JSON.stringify(soak.refused)}; ${soak.turns} turns); ` +
        `under load ${trend.map((mb) => mb.toFixed(2)).join(', ')} MB; still held ${JSON.stringify(held)}; pooled ${pooled}`,
    );
    expect(soak.follows, 'follows opened').toBeGreaterThan(FOLLOWERS * 10);
    expect(soak.events, 'events followed').toBeGreaterThan(soak.follows);
    expect(idle.mb - baseline.mb, `idle heap after the load against after the warm-up: ${growth(baseline, idle)}`).toBeLessThan(HEAP_SLACK_MB);
    expect(held, 'structures still holding entries').toEqual({});
  }, 110_000);
});
