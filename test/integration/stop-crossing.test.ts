/**
 * A stop that fires as the service ends the turn by itself (issue [19]), through the whole
 * stack on a real redis-server: the run limit, the drain and the owner's stop.
 *
 * The workflow simulator's `endsCrossingStops` makes the crossing deterministic: a
 * stopWorkflow arriving ends the call OK without being acted on, as a client sees it when
 * the service's own end was already on its way. After WORKHORSE_SERVER_SHUTDOWN (the word
 * of a drain, and of a run limit on the public service) an OK end can only be the turn's
 * own: the real service answers that stop UNAVAILABLE. So is a turn whose last checkpoint
 * ended it: called back `finished` (no stop outcome counted, nothing left in Redis). After
 * a word the service answers OK (WORKHORSE_RUN_LIMIT on a service that allowlists it), a
 * turn whose last checkpoint did not end it carries the stop's reason with
 * `ended_while_stopping: true`: the OK is that word's ack and a finish alike.
 * Then the race itself, undriven: turns whose last step lands on the run limit, a few
 * milliseconds either side — whichever way each falls, a call that never received a stop
 * is never called back as stopped.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { signOwnerJwt } from '../../src/core/jwt';
import type { SegmentEnd } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import type { WorkflowSimulatorOptions } from '../../sandbox/workflow-sim';
import { testSecret } from '../../stack/secret';
import { metricValue, startStack, type Stack } from '../../stack';

let stack: Stack | undefined;

afterEach(async () => {
  // A stack started with `redis: 'own'` also closes its client and stops its redis-server.
  await stack?.close();
  stack = undefined;
});

/** A stack on its own redis-server whose workflow service ends the call OK when a stop arrives. */
function crossingStack(env: Record<string, string> = {}, workflow: WorkflowSimulatorOptions = { endsCrossingStops: true }): Promise<Stack> {
  return startStack({ redis: 'own', preauth: { detached: true, lockConcurrentFlow: true }, env, workflow });
}

/** A turn that sent its last checkpoint (with `status`) and waits to be stopped. */
const lastThenHang = (status: string): Step[] => [{ op: 'checkpoint', text: 'last step', status }, { op: 'hang' }];

async function accept(s: Stack, id: string, steps: Step[]): Promise<void> {
  const res = await s.executeText(id, { steps });
  expect(res.status, res.text).toBe(202);
}

async function segmentEnd(s: Stack, id: string): Promise<SegmentEnd> {
  await s.owner.waitFor(() => s.owner.segmentEnds.some((e) => e.workflow_id === id), 10_000, `segment end of ${id}`);
  return s.owner.segmentEnds.find((e) => e.workflow_id === id) as SegmentEnd;
}

/** The `run ended` log line of workflow `id`. */
function runEnded(s: Stack, id: string): Record<string, unknown> {
  const line = s
    .logs()
    .split('\n')
    .filter((l) => l.includes('"run ended"'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => l['workflow_id'] === id);
  expect(line, `run ended line of ${id}`).toBeDefined();
  return line as Record<string, unknown>;
}

async function stopAcks(s: Stack): Promise<number> {
  const text = await s.metrics();
  return ['ack', 'already_ended', 'timeout', 'error'].reduce((n, outcome) => n + (metricValue(text, 'longrun_stop_acks_total', { outcome }) ?? 0), 0);
}

describe('a stop crossing the end of a finished turn is reported finished', () => {
  it('the run limit: callback, log line and metrics say finished; no stop outcome; nothing left in Redis', async () => {
    stack = await crossingStack({ LONGRUN_RUN_LIMIT_MS: '300' });
    await accept(stack, '1901', lastThenHang('FINISHED'));
    const end = await segmentEnd(stack, '1901');
    expect(end).toMatchObject({ workflow_id: '1901', reason: 'finished', actions: 1, in_flight: [] });
    expect(end).not.toHaveProperty('ended_while_stopping');
    // The gateway did send the stop; the service never acted on it.
    expect(stack.workflow.callsFor('1901')[0]).toMatchObject({ crossedStops: ['WORKHORSE_SERVER_SHUTDOWN'], stopReasons: [], ended: { how: 'ok' } });
    expect(runEnded(stack, '1901')).toMatchObject({ reason: 'finished', grpc_code: 0 });
    expect(runEnded(stack, '1901')).not.toHaveProperty('stop_outcome');
    const metrics = await stack.metrics();
    expect(metricValue(metrics, 'longrun_teardowns_total', { transport: 'detached', reason: 'finished' })).toBe(1);
    expect(metricValue(metrics, 'longrun_teardowns_total', { transport: 'detached', reason: 'run_limit' })).toBe(0);
    expect(metricValue(metrics, 'longrun_ends_while_stopping_total', { transport: 'detached' })).toBe(0);
    expect(await stopAcks(stack)).toBe(0);
    expect(await stack.client?.keys('workhorse:duoworkflow:*')).toEqual([]);
  });

  it('the run limit (WORKHORSE_SERVER_SHUTDOWN) after a checkpoint that did not end the turn: an OK end is the turn’s own, finished', async () => {
    stack = await crossingStack({ LONGRUN_RUN_LIMIT_MS: '300' });
    await accept(stack, '1902', lastThenHang('RUNNING'));
    const end = await segmentEnd(stack, '1902');
    expect(end).toMatchObject({ reason: 'finished' });
    expect(end).not.toHaveProperty('ended_while_stopping');
    expect(stack.workflow.callsFor('1902')[0]?.crossedStops).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    expect(await stopAcks(stack)).toBe(0);
  });

  it('the run limit sent as WORKHORSE_RUN_LIMIT (allowlisted) after a checkpoint that did not end the turn: run_limit, flagged ended_while_stopping, counted', async () => {
    stack = await crossingStack({ LONGRUN_RUN_LIMIT_MS: '300', LONGRUN_WORKFLOW_INFRA_STOP_REASONS: 'WORKHORSE_SERVER_SHUTDOWN,WORKHORSE_RUN_LIMIT' });
    await accept(stack, '1906', lastThenHang('RUNNING'));
    expect(await segmentEnd(stack, '1906')).toMatchObject({ reason: 'run_limit', ended_while_stopping: true });
    expect(stack.workflow.callsFor('1906')[0]?.crossedStops).toEqual(['WORKHORSE_RUN_LIMIT']);
    expect(runEnded(stack, '1906')).toMatchObject({ reason: 'run_limit', stop_outcome: 'ack', ended_while_stopping: true });
    const metrics = await stack.metrics();
    expect(metricValue(metrics, 'longrun_ends_while_stopping_total', { transport: 'detached' })).toBe(1);
    expect(metricValue(metrics, 'longrun_stop_acks_total', { outcome: 'ack' })).toBe(1);
    expect(await stack.client?.keys('workhorse:duoworkflow:*')).toEqual([]);
  });

  it('the drain: a stop with WORKHORSE_SERVER_SHUTDOWN that an OK end crossed is finished, whatever the last checkpoint said', async () => {
    stack = await crossingStack();
    await accept(stack, '1903', lastThenHang('FINISHED'));
    await accept(stack, '1904', lastThenHang('RUNNING'));
    await stack.gateway.drain();
    expect(await segmentEnd(stack, '1903')).toMatchObject({ reason: 'finished' });
    expect(await segmentEnd(stack, '1904')).toMatchObject({ reason: 'finished' });
    for (const id of ['1903', '1904']) expect(stack.workflow.callsFor(id)[0]?.crossedStops, id).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    const metrics = await stack.gateway.metrics.registry.metrics();
    expect(metricValue(metrics, 'longrun_teardowns_total', { transport: 'detached', reason: 'finished' })).toBe(2);
    expect(metricValue(metrics, 'longrun_teardowns_total', { transport: 'detached', reason: 'drain' })).toBe(0);
    expect(await stack.client?.keys('workhorse:duoworkflow:*')).toEqual([]);
  });

  it("the owner's stop: a turn that finished as the stop was sent is finished, not stop_requested", async () => {
    stack = await crossingStack();
    await accept(stack, '1905', lastThenHang('INPUT_REQUIRED'));
    const stop = await request(`${stack.url}/internal/workflows/1905/stop`, { method: 'POST', headers: { authorization: `Bearer ${await signOwnerJwt(testSecret, '1905')}` } });
    expect(stop.statusCode).toBe(202);
    await stop.body.dump();
    const end = await segmentEnd(stack, '1905');
    expect(end).toMatchObject({ reason: 'finished' });
    expect(end).not.toHaveProperty('ended_while_stopping');
    expect(stack.workflow.callsFor('1905')[0]?.crossedStops).toEqual(['USER_STOP']);
    expect(await stack.client?.keys('workhorse:duoworkflow:*')).toEqual([]);
  });
});

describe('turns whose last step lands on the run limit (the race, undriven)', () => {
  it('a call that received no stop is never called back as stopped; one that did is resumed', async () => {
    const LIMIT_MS = 400;
    // 10 ms each way between the gateway and the service, so that what they send can cross.
    stack = await crossingStack({ LONGRUN_RUN_LIMIT_MS: String(LIMIT_MS) }, { front: { latencyMs: 10 } });
    const s = stack;
    await accept(s, '1909', [{ op: 'checkpoint', text: 'warm-up' }, { op: 'end' }]);
    // The service's last step (FINISHED, then the call's OK end) swept in 3 ms steps across
    // the limit as the service sees it: its clock starts a wire's delay after the gateway's.
    const ids = Array.from({ length: 21 }, (_, i) => String(1910 + i));
    for (const [i, id] of ids.entries()) {
      await accept(s, id, [{ op: 'checkpoint', text: 'first' }, { op: 'turn', checkpoints: 2, finishAtMs: LIMIT_MS - 45 + 3 * i }, { op: 'end' }]);
    }
    await s.owner.waitFor(() => ids.every((id) => s.owner.segmentEnds.some((e) => e.workflow_id === id)), 15_000, 'every segment end');
    const seen = { finished: 0, stopped: 0, crossed: 0 };
    for (const id of ids) {
      const call = s.workflow.callsFor(id)[0];
      const end = s.owner.segmentEnds.find((e) => e.workflow_id === id);
      // Received the stop before it finished → resumable run_limit; else the turn's own end.
      expect(end?.reason, `${id}: stops received ${JSON.stringify(call?.stopReasons)}`).toBe(call?.stopReasons.length ? 'run_limit' : 'finished');
      expect(end, id).not.toHaveProperty('ended_while_stopping');
      if (call?.stopReasons.length) seen.stopped += 1;
      else seen.finished += 1;
      // The stop reached the service after its own end: the two crossed on the wire.
      if (call?.lateStops.length) seen.crossed += 1;
    }
    console.log(`turns finishing on the run limit: ${ids.length}; finished ${seen.finished} (the stop crossed their end: ${seen.crossed}), stopped first ${seen.stopped}`);
    expect(seen.finished).toBeGreaterThan(0);
    expect(seen.stopped).toBeGreaterThan(0);
    expect(await stack.client?.keys('workhorse:duoworkflow:*')).toEqual([]);
  });
});
