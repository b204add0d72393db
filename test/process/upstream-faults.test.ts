/**
 * Upstreams that misbehave the way they do in production (issue [11], classes 5 and 6):
 *
 *  - a workflow service that accepts the TCP connection and never speaks HTTP/2 gives
 *    502 WORKFLOW_SERVICE_UNAVAILABLE before acceptance — never a 202 for a stream that
 *    never opened — and nothing stays taken;
 *  - a lock acquisition the gateway gave up on (Redis stalled, SIGSTOP) is given back
 *    when Redis runs it late, so the retry the 503 invites succeeds.
 */
import { afterEach, describe, expect, it } from 'vitest';
import net from 'node:net';
import { request } from 'undici';
import { lockKey } from '../../src/redis/keys';
import { startStack, type Stack } from '../../stack';

let stack: Stack | undefined;
let blackHole: net.Server | undefined;
const sockets = new Set<net.Socket>();

afterEach(async () => {
  // The stack's own redis-server (redis: 'own') and its client go with it, resumed first.
  await stack?.close();
  stack = undefined;
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  await new Promise<void>((resolve) => (blackHole ? blackHole.close(() => resolve()) : resolve()));
  blackHole = undefined;
});

/** A "workflow service" that accepts connections and never sends a byte. */
async function startBlackHole(): Promise<string> {
  blackHole = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => blackHole!.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${(blackHole.address() as net.AddressInfo).port}`;
}

describe('a workflow service that accepts the connection and never answers', () => {
  it.each([
    ['detached', true],
    ['blocking', false],
  ])('%s: 502 WORKFLOW_SERVICE_UNAVAILABLE after the stream-open timeout, no run accepted, nothing left taken', async (_label, detached) => {
    stack = await startStack({ redis: 'own', preauth: { detached, lockConcurrentFlow: true }, env: { LONGRUN_STREAM_OPEN_TIMEOUT_MS: '800', LONGRUN_ACCEPT_WAIT_MS: '3000' } });
    stack.owner.configure('90', { detached, lockConcurrentFlow: true, serviceUri: await startBlackHole() });
    const started = performance.now();
    const res = await stack.executeText('90');
    const elapsed = performance.now() - started;
    expect(res.status).toBe(502);
    expect(JSON.parse(res.text)).toMatchObject({ error: { code: 'WORKFLOW_SERVICE_UNAVAILABLE', retryable: true } });
    expect(elapsed).toBeGreaterThanOrEqual(700);
    expect(elapsed).toBeLessThan(3_000);
    expect(sockets.size).toBeGreaterThan(0);
    expect(await stack.client!.exists(lockKey('90'))).toBe(0);
    expect(await (await request(`${stack.opsUrl}/runs`)).body.json()).toEqual({ runs: [] });
    expect(stack.owner.segmentEnds).toEqual([]);
    const ended = stack
      .logs()
      .split('\n')
      .find((l) => l.includes('"msg":"run ended"'));
    expect(JSON.parse(ended ?? '{}')).toMatchObject({ workflow_id: '90', reason: 'workflow_unavailable' });
  });
});

describe('a lock acquisition that timed out', () => {
  it('is given back when Redis runs it late: the retry succeeds instead of finding the workflow locked', async () => {
    stack = await startStack({ redis: 'own', preauth: { detached: true }, env: { LONGRUN_REDIS_COMMAND_TIMEOUT_MS: '400' } });
    process.kill(stack.redis!.pid as number, 'SIGSTOP');
    const first = await stack.executeText('91', { steps: [{ op: 'checkpoint' }, { op: 'hang' }] });
    expect(first.status).toBe(503);
    expect(JSON.parse(first.text)).toMatchObject({ error: { code: 'LOCK_UNAVAILABLE' } });
    process.kill(stack.redis!.pid as number, 'SIGCONT');
    // Redis now runs the stalled SET NX, then the compare-and-delete queued after it.
    await expect.poll(() => stack!.client!.exists(lockKey('91')), { timeout: 3_000 }).toBe(0);
    await expect.poll(async () => (await stack!.executeText('91', { steps: [{ op: 'checkpoint' }, { op: 'hang' }] })).status, { timeout: 5_000 }).toBe(202);
    expect(stack.workflow.callsFor('91')).toHaveLength(1);
  });
});
