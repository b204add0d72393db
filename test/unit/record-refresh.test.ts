/**
 * A renewal rewrites the run record's fields only when they changed since the record was
 * last stored (docs/spec.md §5): an idle run's renewals extend the record's TTL and send
 * nothing else. What each renewal sent is read at the (real, in-memory) store, under a
 * real lease keeper with a short lease.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { LeaseRenewal, RenewOutcome } from '../../src/coordination/backend';
import { CoordinationError } from '../../src/coordination/backend';
import { LeaseKeeper } from '../../src/coordination/lease-keeper';
import { MemoryBackend } from '../../src/coordination/memory-backend';
import { RunCoordination } from '../../src/coordination/run-coordination';
import { RunSnapshot } from '../../src/coordination/run-snapshot';
import { StopWatcher } from '../../src/coordination/stop-watcher';
import { GatewayMetrics } from '../../src/gateway-metrics';

const TTL_MS = 600;

class RecordingBackend extends MemoryBackend {
  readonly sent: LeaseRenewal[] = [];
  failNext = false;

  override async renewMany(ttlMs: number, leases: readonly LeaseRenewal[]): Promise<RenewOutcome[]> {
    this.sent.push(...leases);
    if (this.failNext) {
      this.failNext = false;
      return leases.map(() => new CoordinationError('renew failed'));
    }
    return super.renewMany(ttlMs, leases);
  }
}

let close: (() => Promise<void>) | undefined;

afterEach(async () => {
  await close?.();
  close = undefined;
});

async function start() {
  const backend = new RecordingBackend();
  const leases = new LeaseKeeper(backend, { ttlMs: TTL_MS });
  const stopWatcher = new StopWatcher(backend, 60_000);
  const snapshot = new RunSnapshot('run-1', 'replica-1', 'detached');
  expect(await backend.acquire('wf', 'token', TTL_MS)).toBe(true);
  const coordination = new RunCoordination(
    { backend, leases, stopWatcher, metrics: new GatewayMetrics({ defaultMetrics: false }).coordination, leaseTtlMs: TTL_MS },
    'wf',
    snapshot,
    { token: 'token', acquiredAt: Date.now() },
    undefined,
  );
  coordination.attach({ stop: () => undefined });
  close = async () => {
    await coordination.release();
    leases.close();
  };
  /** Waits for the next renewal and returns what it sent. */
  const nextRenewal = async (): Promise<LeaseRenewal> => {
    const before = backend.sent.length;
    while (backend.sent.length === before) await sleep(10);
    // Its answer handled before the test looks (or changes anything).
    await sleep(5);
    return backend.sent[before] as LeaseRenewal;
  };
  return { backend, snapshot, coordination, nextRenewal };
}

describe('record fields in renewals', { timeout: 20_000 }, () => {
  it('sends the fields once after a change, then only extends the record; a failed renewal makes the next one send them again', async () => {
    const { backend, snapshot, coordination, nextRenewal } = await start();
    snapshot.noteState('running');
    await coordination.writeRecord(() => undefined);
    // The record as written: the renewals after it send no fields.
    expect((await nextRenewal()).refresh).toEqual({ runId: 'run-1' });
    expect((await nextRenewal()).refresh).toEqual({ runId: 'run-1' });
    expect((await backend.readRunRecord('wf'))?.state).toBe('running');

    snapshot.noteAction(Date.parse('2026-12-01T10:00:00.000Z'));
    expect((await nextRenewal()).refresh).toEqual({ runId: 'run-1', record: { state: 'running', lastActionAt: '2026-12-01T10:00:00.000Z', inFlight: '[]' } });
    expect((await backend.readRunRecord('wf'))?.last_action_at).toBe('2026-12-01T10:00:00.000Z');
    expect((await nextRenewal()).refresh).toEqual({ runId: 'run-1' });

    // A renewal that failed may or may not have been applied: the one after it (a retry,
    // which can follow within a tick) sends everything again; the next, nothing.
    const inFlight = '[{"kind":"http","request_id":"7","method":"GET"}]';
    snapshot.relayed({ kind: 'http', request_id: '7', method: 'GET' });
    backend.failNext = true;
    const failedAt = backend.sent.length;
    while (backend.sent.length < failedAt + 3) await sleep(10);
    const [failed, retried, next] = backend.sent.slice(failedAt, failedAt + 3).map((r) => r.refresh);
    expect(failed?.record?.inFlight).toBe(inFlight);
    expect(retried?.record?.inFlight).toBe(inFlight);
    expect(next).toEqual({ runId: 'run-1' });
    expect((await backend.readRunRecord('wf'))?.in_flight).toBe(inFlight);
  });

  it('a record write that fails leaves the next renewal sending every field', async () => {
    const { backend, snapshot, coordination, nextRenewal } = await start();
    snapshot.noteState('running');
    await coordination.writeRecord(() => undefined);
    expect((await nextRenewal()).refresh).toEqual({ runId: 'run-1' });
    // Rewritten unchanged (as a parked run's record is), and the write fails: what Redis holds is not known.
    const errors: unknown[] = [];
    backend.writeRunRecord = () => Promise.reject(new CoordinationError('write failed'));
    await coordination.writeRecord((err) => errors.push(err));
    expect(errors).toHaveLength(1);
    expect((await nextRenewal()).refresh.record?.state).toBe('running');
  });
});
