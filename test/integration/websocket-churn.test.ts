/**
 * A thousand WebSocket sessions churned through one gateway (docs/spec.md §11 "nothing
 * leaks"), ending every way a session ends — the flow's end, the client's close frame, a
 * connection lost (its run parked, then ended by its resume window) — 25 at a time, on a
 * real redis-server. Afterwards the process holds
 * what it held after a warm-up: no run, no session, no lock or run record in Redis, no
 * file descriptor, timer or socket more than then.
 */
import { readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { scenarioMetadata } from '../../sandbox/scenario';
import { metricValue, startStack, type Stack } from '../../stack';

const SESSIONS = 1_000;
const CONCURRENCY = 25;

let stack: Stack;

/** Lost connections park their runs for 300 ms (docs/spec.md §12), then the window ends them. */
const RESUME_WINDOW_MS = 300;

beforeAll(async () => {
  stack = await startStack({
    redis: 'own',
    preauth: { lockConcurrentFlow: true },
    env: { LONGRUN_STOP_ACK_TIMEOUT_MS: '2000', LONGRUN_LOG_LEVEL: 'warn', LONGRUN_WS_RESUME_WINDOW_MS: String(RESUME_WINDOW_MS) },
  });
});
afterAll(async () => {
  await stack?.close();
});

type Ending = 'flow' | 'close' | 'lost';

/** One session: a start, its first checkpoint, then the end `ending` names; resolves once the socket closed. */
function session(id: string, ending: Ending): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${stack.url.replace('http', 'ws')}/api/v4/ai/duo_workflows/ws`);
    const steps = ending === 'flow' ? [{ op: 'checkpoint', text: 'a' }, { op: 'end' }] : [{ op: 'checkpoint', text: 'a' }, { op: 'hang' }];
    ws.once('open', () => ws.send(JSON.stringify({ startRequest: { workflowID: id, goal: 'churn', workflowMetadata: scenarioMetadata(steps as never) } })));
    ws.once('message', () => {
      if (ending === 'close') ws.close(1000);
      if (ending === 'lost') ws.terminate();
    });
    ws.once('close', (code) => resolve(code));
    ws.once('error', reject);
  });
}

async function churn(from: number, count: number): Promise<Map<number, number>> {
  const codes = new Map<number, number>();
  let next = 0;
  const endings: Ending[] = ['flow', 'close', 'lost'];
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        const i = next++;
        const code = await session(String(from + i), endings[i % 3] as Ending);
        codes.set(code, (codes.get(code) ?? 0) + 1);
      }
    }),
  );
  return codes;
}

function held(): { fds: number; timers: number; sockets: number } {
  const resources = process.getActiveResourcesInfo();
  return {
    fds: readdirSync('/proc/self/fd').length,
    timers: resources.filter((r) => r === 'Timeout').length,
    sockets: resources.filter((r) => r === 'TCPSocketWrap').length,
  };
}

async function settled(): Promise<void> {
  await expect.poll(() => stack.gateway.registry.size, { timeout: 15_000 }).toBe(0);
  await expect.poll(async () => (await stack.gateway.metrics.websocket.websocketSessionsOpen.get()).values[0]?.value, { timeout: 15_000 }).toBe(0);
  await expect.poll(() => stack.workflow.openCalls, { timeout: 15_000 }).toBe(0);
  // What closed sockets and ended calls leave to the event loop's next turns.
  await new Promise((r) => setTimeout(r, 1_500));
}

describe('1 000 churned WebSocket sessions', () => {
  it('leave no run, session, Redis key, file descriptor, timer or socket behind', async () => {
    await churn(900_000, 30);
    await settled();
    const before = held();
    const codes = await churn(910_000, SESSIONS);
    await settled();
    const after = held();
    // The flow's end is closed 1000 by the gateway; a client's close is echoed 1000; a lost one is 1006 on the client.
    expect(Object.fromEntries(codes)).toEqual({ 1000: 667, 1006: 333 });
    expect(stack.workflow.calls.filter((c) => c.workflowId.startsWith('91'))).toHaveLength(SESSIONS);
    expect(await stack.client?.keys('workhorse:duoworkflow:*')).toEqual([]);
    expect(stack.gateway.registry.size).toBe(0);
    // Every lost one was parked, and its window ended it.
    expect(metricValue(await stack.metrics(), 'longrun_websocket_park_ends_total', { why: 'expired' })).toBeGreaterThanOrEqual(333);
    expect(metricValue(await stack.metrics(), 'longrun_websocket_backlog_bytes')).toBe(0);
    expect(after.fds - before.fds).toBeLessThanOrEqual(5);
    expect(after.timers - before.timers).toBeLessThanOrEqual(3);
    expect(after.sockets - before.sockets).toBeLessThanOrEqual(3);
  }, 120_000);
});
