/**
 * Following a workflow across a fleet (docs/spec.md §14), with real replicas: three built
 * gateways as child processes (`node dist/src/main.js`) on one redis-server, the simulated
 * owner dispatching each next segment of one turn to the next replica. The turn crosses a
 * run limit, a drain of the replica holding it, and moves between replicas; one follower on
 * a replica that stays sees one stream — every step of the turn once, in order, each run's
 * `run` and `end`, no id skipped — and a second follower, on the replica that is drained,
 * has its stream ended cleanly by the drain and resumes on another replica by Last-Event-ID
 * without missing or repeating an event of the first's.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { OwnerServiceSimulator } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';
import { followPath, firstGap, openSse, type SseEvent, type SseStream } from '../helpers/sse';

const STEPS = 60;
const STEP_MS = 100;
const WORKFLOW = '4242';
const turn: Step[] = [{ op: 'turn', checkpoints: STEPS, intervalMs: STEP_MS, write: { method: 'POST', path: '/api/v4/echo' } }, { op: 'end' }];

let stack: Stack<'process'>;
let owner: OwnerServiceSimulator;
const streams: SseStream[] = [];

beforeAll(async () => {
  stack = await startStack({
    gateway: 'process',
    replicas: 0,
    name: 'follow',
    redis: 'own',
    preauth: { detached: true },
    env: {
      LONGRUN_RUN_LIMIT_MS: '2500',
      LONGRUN_LEASE_TTL_MS: '3000',
      LONGRUN_STOP_ACK_TIMEOUT_MS: '1000',
      LONGRUN_DRAIN_TIMEOUT_MS: '4000',
      LONGRUN_FOLLOW_IDLE_MS: '15000',
    },
  });
  ({ owner } = stack);
});

afterAll(async () => {
  for (const s of streams) s.close();
  await stack?.close();
});

async function follow(replica: Replica, headers: Record<string, string> = {}): Promise<SseStream> {
  const stream = await openSse(`${replica.url}${followPath(WORKFLOW)}`, headers);
  streams.push(stream);
  expect(stream.status).toBe(200);
  return stream;
}

const view = (events: readonly SseEvent[]): Array<[number | undefined, string, string]> => events.map((e) => [e.id, e.event, e.data]);

it('a follower sees one gap-free stream across a run limit, a drain of the holder and moves between replicas; one on the drained replica resumes elsewhere without a loss or a repeat', async () => {
  const [a, b, c] = (await stack.startReplicas(3)) as [Replica, Replica, Replica];
  const alive = new Set([a, b, c]);
  const order = [a, b, c];
  const dispatched: string[] = [];
  // The owner: a resumable segment end dispatches the turn's next segment to the next live replica.
  owner.onSegmentEnd = (end) => {
    if (end.workflow_id !== WORKFLOW || end.reason === 'finished' || end.reason === 'stop_requested') return;
    const from = order.findIndex((r) => r.name === dispatched.at(-1));
    const next = [1, 2, 3].map((k) => order[(from + k) % 3] as Replica).find((r) => alive.has(r)) as Replica;
    dispatched.push(next.name);
    void next.execute(WORKFLOW, turn);
  };
  dispatched.push(a.name);
  expect((await a.execute(WORKFLOW, turn)).status).toBe(202);

  const steady = await follow(c);
  const moving = await follow(b);
  const runOn = (stream: SseStream, replica: string) =>
    stream.waitFor((events) => events.some((e) => e.event === 'run' && e.json['replica'] === replica), 15_000, `a run on ${replica}`);

  // The first segment ends at its run limit; the next runs on b: drain b while it holds the turn.
  await runOn(steady, b.name);
  await steady.waitFor((events) => events.at(-1)?.event === 'checkpoint' && events.findLast((e) => e.event === 'run')?.json['replica'] === b.name, 10_000, 'a step on b');
  alive.delete(b);
  b.child.process.kill('SIGTERM');
  // The drain ends b's follow stream cleanly, after the end of b's run.
  expect(await moving.closed).toBe('ended');
  const beforeDrop = moving.events;
  expect(beforeDrop.at(-1)).toMatchObject({ event: 'end', json: expect.objectContaining({ reason: 'drain', resumable: true }) });
  expect(await b.child.exited(10_000)).toBe(0);
  // The client resumes on another replica from the last id it got.
  const resumed = await follow(a, { 'last-event-id': String(beforeDrop.at(-1)?.id) });

  await steady.waitFor((events) => events.some((e) => e.event === 'idle'), 60_000, 'the end of the turn');
  await resumed.waitFor((events) => events.some((e) => e.event === 'idle'), 10_000, 'the end of the turn (resumed)');

  const events = steady.events;
  // One stream: no id skipped, none repeated, from the first event to the last.
  expect(firstGap(events)).toBeUndefined();
  expect(events.at(-1)?.event).toBe('idle');
  // Each run's `run`, then its `end`: a run limit, the drain, moves, and the end of the turn.
  const runs = events.filter((e) => e.event === 'run').map((e) => e.json['replica']);
  const ends = events.filter((e) => e.event === 'end').map((e) => e.json['reason']);
  expect(runs.slice(0, 3)).toEqual([a.name, b.name, c.name]);
  expect(ends).toContain('run_limit');
  expect(ends).toContain('drain');
  expect(ends.at(-1)).toBe('finished');
  expect(runs).toHaveLength(ends.length);
  expect(events.map((e) => e.event).filter((k) => k === 'run' || k === 'end')).toEqual(runs.flatMap(() => ['run', 'end']));
  // Every step of the turn once, in order, after the first one the follower saw.
  const steps = events.filter((e) => e.event === 'checkpoint').map((e) => (e.json['newCheckpoint'] as { checkpoint: string }).checkpoint);
  const from = Number(/^step (\d+)\//.exec(steps[0] ?? '')?.[1]);
  expect(steps).toEqual(Array.from({ length: STEPS - from + 1 }, (_, i) => `step ${from + i}/${STEPS}`));

  // The follower that was on b: from what followed its start (the latest run and checkpoint), what it got before the
  // drain and after resuming on a is the steady one's, exactly.
  expect(beforeDrop[0]?.event).toBe('run');
  const firstId = beforeDrop[1]?.id as number;
  const expected = view(events.filter((e) => e.id === undefined || e.id >= firstId));
  expect([...view(beforeDrop.slice(1)), ...view(resumed.events)]).toEqual(expected);
}, 120_000);
