/**
 * longrun/client's follow() (docs/spec.md §14) against real gateways (in this process, on a
 * real redis-server): the typed events of a workflow's runs until idle; a stream that drops
 * (the replica serving it drains) reopened by itself on the next endpoint with Last-Event-ID,
 * every event once and in order; `after`; a refusal thrown, not retried; the caller's signal.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { LongrunClient, LongrunError, type FollowEvent } from '@longrun/client';
import type { Step } from '../../sandbox/scenario';
import { startStack, type Stack } from '../../stack';

let stack: Stack | undefined;
const clients: LongrunClient[] = [];
let nextWorkflow = 7_100;
const newWorkflow = (): string => String(nextWorkflow++);

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await stack?.close();
  stack = undefined;
});

function clientFor(url: string | string[]): LongrunClient {
  const client = new LongrunClient({ url, retry: { baseDelayMs: 20, maxDelayMs: 100 } });
  clients.push(client);
  return client;
}

async function detached(client: LongrunClient, workflowId: string, steps: Step[]): Promise<void> {
  const result = await client.execute(workflowId, { goal: 'followed', workflowMetadata: { scenario: steps } });
  expect(result.kind).toBe('accepted');
}

async function collect(events: AsyncIterable<FollowEvent>, each?: (event: FollowEvent, seen: FollowEvent[]) => Promise<void> | void): Promise<FollowEvent[]> {
  const seen: FollowEvent[] = [];
  for await (const event of events) {
    seen.push(event);
    await each?.(event, seen);
  }
  return seen;
}

const consecutive = (events: FollowEvent[]): boolean => {
  const ids = events.flatMap((e) => (e.id === undefined ? [] : [e.id]));
  return ids.every((id, i) => i === 0 || id === (ids[i - 1] as number) + 1);
};

describe('follow()', () => {
  it('yields the runs’ events, typed, and ends after idle', async () => {
    // The follow from an id starts after the run ended: it waits this long for the next, then ends idle.
    stack = await startStack({ redis: 'own', preauth: { detached: true }, env: { LONGRUN_LOG_LEVEL: 'warn', LONGRUN_FOLLOW_IDLE_MS: '400' } });
    const client = clientFor(stack.url);
    const id = newWorkflow();
    await detached(client, id, [
      { op: 'checkpoint', text: 'one' },
      { op: 'wait', ms: 300 },
      { op: 'http', path: '/api/v4/projects/1' },
      { op: 'checkpoint', text: 'two', status: 'FINISHED' },
      { op: 'end' },
    ]);
    const events = await collect(client.follow(id));
    expect(events.map((e) => e.event)).toEqual(['run', 'action', 'checkpoint', 'end', 'idle']);
    const [run, action, checkpoint, end, idle] = events;
    if (run?.event !== 'run' || action?.event !== 'action' || checkpoint?.event !== 'checkpoint' || end?.event !== 'end' || idle?.event !== 'idle') throw new Error('kinds');
    expect(run.data.transport).toBe('detached');
    expect(action.data).toEqual({ run_id: run.data.run_id, kind: 'runHTTPRequest', request_id: '2' });
    expect(checkpoint.data.newCheckpoint).toMatchObject({ checkpoint: 'two', status: 'FINISHED' });
    expect(end.data).toMatchObject({ run_id: run.data.run_id, reason: 'finished', in_flight: [], resumable: false });
    expect(idle).toEqual({ event: 'idle', id: undefined, data: { workflow_id: id } });
    expect(consecutive(events)).toBe(true);

    // From an event id: what came after it.
    const after = await collect(client.follow(id, { after: action.id }));
    expect(after.map((e) => [e.event, e.id])).toEqual([
      ['checkpoint', checkpoint.id],
      ['end', end.id],
      ['idle', undefined],
    ]);
  });

  it('reopens a stream that dropped (its replica drained) on the next endpoint, by Last-Event-ID: every event once, in order', async () => {
    stack = await startStack({ redis: 'own', preauth: { detached: true }, env: { LONGRUN_LOG_LEVEL: 'warn', LONGRUN_REPLICA_ID: 'holder' } });
    const peer = await stack.startReplica({ env: { LONGRUN_REPLICA_ID: 'drained' } });
    const s = stack;
    const id = newWorkflow();
    await detached(clientFor(s.url), id, [
      { op: 'checkpoint', text: 'start' },
      {
        op: 'repeat',
        times: 20,
        steps: [
          { op: 'checkpoint', text: 'step' },
          { op: 'wait', ms: 100 },
        ],
      },
      { op: 'checkpoint', text: 'done', status: 'FINISHED' },
      { op: 'end' },
    ]);
    // The follow opens on the first endpoint, the replica about to drain.
    const client = clientFor([peer.url, s.url]);
    let drained: Promise<void> | undefined;
    const events = await collect(client.follow(id), (_event, seen) => {
      if (seen.length === 5) drained = peer.gateway.drain();
    });
    await drained;
    expect(events.at(-1)?.event).toBe('idle');
    expect(consecutive(events)).toBe(true);
    const steps = events.filter((e) => e.event === 'checkpoint');
    expect(steps.at(-1)?.data.newCheckpoint.checkpoint).toBe('done');
    expect(steps.length).toBeGreaterThanOrEqual(18);
    // Asked twice: first on the drained replica, then on the other with the last id it had.
    const asked = s.owner.preauths.filter((p) => p.path.endsWith('/follow'));
    expect(asked).toHaveLength(2);
    expect(asked[0]?.headers['last-event-id']).toBeUndefined();
    expect(Number(asked[1]?.headers['last-event-id'])).toBe(events[4]?.id);
  });

  it('throws the owner’s refusal (not retried) and the caller’s abort', async () => {
    stack = await startStack({ redis: 'own', preauth: { detached: true }, env: { LONGRUN_LOG_LEVEL: 'warn' } });
    const client = clientFor(stack.url);
    const denied = newWorkflow();
    stack.owner.configure(denied, { deny: { status: 403, body: '{"message":"403 Forbidden"}' } });
    const error = await collect(client.follow(denied)).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(LongrunError);
    expect(error).toMatchObject({ code: 'PREAUTH_DENIED', status: 403, attempts: 1 });

    const id = newWorkflow();
    await detached(client, id, [{ op: 'checkpoint', text: 'one' }, { op: 'hang' }]);
    const controller = new AbortController();
    const aborted = await collect(client.follow(id, { signal: controller.signal }), () => controller.abort(new Error('enough'))).catch((err: unknown) => err);
    expect((aborted as Error).message).toBe('enough');
    await expect.poll(() => stack?.gateway.follow.stats.followers, { timeout: 3_000 }).toBe(0);
  });
});
