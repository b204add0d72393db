/**
 * Load generation against the gateway, bounded in count and time and aimed at loopback
 * only: the execute request as a dispatcher sends it, a WebSocket session as the web chat
 * opens it, a closed-loop ramp (N requests, at most C in flight) and an open-loop schedule
 * (a fixed offered rate that does not wait for answers, so queueing in the gateway shows
 * as latency).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import WebSocket from 'ws';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';

export interface ExecuteResult {
  status: number;
  /** From the request being handed to the client to the whole answer read. */
  ms: number;
  body: string;
}

/** A dispatcher's HTTP client of the gateway's execute route. */
export class ExecuteClient {
  private readonly pool: Pool;

  constructor(url: string, connections = 64) {
    if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(url)) throw new Error(`load generators only target 127.0.0.1, not ${url}`);
    // No body or headers timeout: a blocking turn holds its answer for the whole turn.
    this.pool = new Pool(url, { connections, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
  }

  async execute(workflowId: string, steps: Step[]): Promise<ExecuteResult> {
    const body = JSON.stringify({ goal: 'bench', workflowMetadata: scenarioMetadata(steps) });
    const started = performance.now();
    try {
      const res = await this.pool.request({
        method: 'POST',
        path: `/api/v4/ai/duo_workflows/workflows/${encodeURIComponent(workflowId)}/execute`,
        headers: { 'content-type': 'application/json' },
        body,
      });
      const text = await res.body.text();
      return { status: res.statusCode, ms: performance.now() - started, body: text };
    } catch (err) {
      return { status: 0, ms: performance.now() - started, body: (err as Error).message };
    }
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

export type WsSessionResult = { ok: true; ws: WebSocket; ms: number } | { ok: false; reason: string; ms: number };

/**
 * Opens a WebSocket session as the web chat does — `?client_type=browser`, the page's
 * own Origin — sends its startRequest (a text frame) and resolves once the first
 * binary frame (the first action) arrived, or with why it did not (the refusal's status,
 * a close code, an error, a timeout). The socket then stays open, answering pings (ws
 * does by default), until the caller closes it.
 */
export function openWsSession(baseUrl: string, path: string, workflowId: string, steps: Step[], timeoutMs = 60_000): Promise<WsSessionResult> {
  const origin = new URL(baseUrl);
  if (origin.hostname !== '127.0.0.1') throw new Error(`load generators only target 127.0.0.1, not ${baseUrl}`);
  const started = performance.now();
  const ws = new WebSocket(`ws://${origin.host}${path}?client_type=browser`, { origin: `http://${origin.host}` });
  ws.on('error', () => undefined);
  return new Promise((resolve) => {
    let settled = false;
    const onOpen = (): void => {
      ws.send(JSON.stringify({ startRequest: { workflowID: workflowId, goal: 'bench', workflowMetadata: scenarioMetadata(steps) } }));
    };
    const onMessage = (_data: unknown, isBinary: boolean): void => {
      if (isBinary) done(null);
    };
    const onRefused = (_req: unknown, res: { statusCode?: number }): void => done(`status ${res.statusCode ?? 0}`);
    const onClose = (code: number): void => done(`close ${code}`);
    const onError = (err: NodeJS.ErrnoException): void => done(err.code ?? 'error');
    const timer = setTimeout(() => done('timeout'), timeoutMs);
    /** null: the first action came. */
    function done(reason: string | null): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      ws.off('open', onOpen).off('message', onMessage).off('unexpected-response', onRefused).off('close', onClose).off('error', onError);
      const ms = performance.now() - started;
      if (reason === null) {
        resolve({ ok: true, ws, ms });
      } else {
        ws.terminate();
        resolve({ ok: false, reason, ms });
      }
    }
    ws.on('open', onOpen).on('message', onMessage).on('unexpected-response', onRefused).on('close', onClose).on('error', onError);
  });
}

/** Runs task(0..count-1) with at most `concurrency` in flight; resolves with the elapsed ms. */
export async function closedLoop(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<number> {
  const started = performance.now();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, () => worker()));
  return performance.now() - started;
}

/**
 * Starts task(i) at start + i / ratePerS, never waiting for earlier tasks (open loop);
 * resolves when every task has settled. Returns how late the scheduler fired, at worst:
 * a late driver would understate the offered rate.
 */
export async function openLoop(ratePerS: number, count: number, task: (i: number) => Promise<void>): Promise<{ elapsedMs: number; worstLateMs: number }> {
  const started = performance.now();
  const intervalMs = 1_000 / ratePerS;
  const running: Array<Promise<void>> = [];
  let worstLateMs = 0;
  for (let i = 0; i < count; i++) {
    const due = started + i * intervalMs;
    const now = performance.now();
    if (due > now + 1) await sleep(due - now);
    worstLateMs = Math.max(worstLateMs, performance.now() - due);
    running.push(task(i));
  }
  await Promise.allSettled(running);
  return { elapsedMs: performance.now() - started, worstLateMs };
}
