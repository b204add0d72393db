/**
 * The in-process coordination backend keeps Redis's semantics (docs/spec.md §5), checked with a
 * fake clock; and the stop endpoint works end to end on it (single replica).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { MemoryBackend } from '../../src/coordination/memory-backend';
import { signOwnerJwt } from '../../src/core/jwt';
import { testSecret } from '../../stack/secret';
import { startStack, type Stack } from '../../stack';

function fakeClock(): { now(): number; advance(ms: number): void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

const refresh = { runId: 'run-1', record: { state: 'running', lastActionAt: '' } };

describe('MemoryBackend', () => {
  it('lock: NX, token-checked renewal and release, expiry after the TTL', async () => {
    const clock = fakeClock();
    const backend = new MemoryBackend(clock);
    expect(await backend.acquire('w', 'a', 100)).toBe(true);
    expect(await backend.acquire('w', 'b', 100)).toBe(false);
    clock.advance(90);
    expect(await backend.renew('w', 'a', 100, refresh)).toEqual({ owned: true, stop: null });
    clock.advance(90);
    expect(await backend.acquire('w', 'b', 100)).toBe(false);
    expect(await backend.renew('w', 'b', 100, refresh)).toEqual({ owned: false, stop: null });
    await backend.release('w', 'b', 'run-b');
    expect(backend.holder('w')).toBe('a');
    clock.advance(101);
    expect(backend.holder('w')).toBeUndefined();
    expect(await backend.renew('w', 'a', 100, refresh)).toEqual({ owned: false, stop: null });
    expect(await backend.acquire('w', 'b', 100)).toBe(true);
  });

  it('stop keys: set only while a run holds the lock, seen by renewals, expire, cleared by release', async () => {
    const clock = fakeClock();
    const backend = new MemoryBackend(clock);
    const notices: string[] = [];
    backend.onStopNotice((id) => notices.push(id));
    expect(await backend.requestStop('w', 'USER_STOP', 1_000)).toBe(false);
    expect(await backend.readStop('w')).toBeNull();
    await backend.acquire('w', 'a', 10_000);
    expect(await backend.requestStop('w', 'USER_STOP', 1_000)).toBe(true);
    await Promise.resolve();
    expect(notices).toEqual(['w']);
    expect((await backend.renew('w', 'a', 10_000, refresh)).stop).toBe('USER_STOP');
    clock.advance(1_001);
    expect(await backend.readStop('w')).toBeNull();
    await backend.requestStop('w', 'X', 1_000);
    await backend.release('w', 'a', 'run-1');
    expect(await backend.readStop('w')).toBeNull();
  });

  it('run records follow the lease and are deleted only by their run', async () => {
    const clock = fakeClock();
    const backend = new MemoryBackend(clock);
    await backend.acquire('w', 'a', 100);
    const record = { run_id: 'run-1', replica: 'r', transport: 'detached', state: 'running', started_at: 't', last_action_at: '' };
    await backend.writeRunRecord('w', record, 100);
    clock.advance(90);
    await backend.renew('w', 'a', 100, { ...refresh, record: { state: 'running', lastActionAt: 'later' } });
    clock.advance(90);
    expect(await backend.readRunRecord('w')).toMatchObject({ run_id: 'run-1', last_action_at: 'later' });
    await backend.release('w', 'a', 'run-2');
    expect(await backend.readRunRecord('w')).not.toBeNull();
    await backend.release('w', 'a', 'run-1');
    expect(await backend.readRunRecord('w')).toBeNull();
  });

  it('actor slots: capped, released, and expired entries do not leak', async () => {
    const clock = fakeClock();
    const backend = new MemoryBackend(clock);
    expect(await backend.acquireActorSlot('u', 'm1', 2, 100)).toBe(true);
    expect(await backend.acquireActorSlot('u', 'm2', 2, 100)).toBe(true);
    expect(await backend.acquireActorSlot('u', 'm3', 2, 100)).toBe(false);
    await backend.releaseActorSlot('u', 'm1');
    expect(await backend.acquireActorSlot('u', 'm3', 2, 100)).toBe(true);
    clock.advance(101);
    expect(await backend.acquireActorSlot('u', 'm4', 2, 100)).toBe(true);
    expect(await backend.acquireActorSlot('u', 'm5', 2, 100)).toBe(true);
  });
});

describe('the stop endpoint on a single replica (in-process backend)', () => {
  let stack: Stack | undefined;
  afterEach(async () => {
    await stack?.close();
    stack = undefined;
  });

  it('stops a detached run in flight; 409 once it is gone', async () => {
    stack = await startStack({ preauth: { detached: true } });
    expect((await stack.executeText('700', { steps: [{ op: 'checkpoint' }, { op: 'hang' }] })).status).toBe(202);
    const auth = { authorization: `Bearer ${await signOwnerJwt(testSecret, '700')}` };
    const record = await request(`${stack.url}/internal/workflows/700/run`, { headers: auth });
    expect(record.statusCode).toBe(200);
    expect(await record.body.json()).toMatchObject({ workflow_id: '700', transport: 'detached', state: 'running' });
    const stop = await request(`${stack.url}/internal/workflows/700/stop`, { method: 'POST', headers: auth });
    expect(stop.statusCode).toBe(202);
    await stop.body.dump();
    await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 1, 5_000, 'segment end');
    expect(stack.workflow.callsFor('700')[0]?.stopReasons).toEqual(['USER_STOP']);
    expect(stack.owner.segmentEnds[0]?.reason).toBe('stop_requested');
    const again = await request(`${stack.url}/internal/workflows/700/stop`, { method: 'POST', headers: auth });
    expect(again.statusCode).toBe(409);
    await again.body.dump();
    const gone = await request(`${stack.url}/internal/workflows/700/run`, { headers: auth });
    expect(gone.statusCode).toBe(404);
    await gone.body.dump();
  });
});
