/**
 * A WebSocket client of the gateway's session route for tests (docs/spec.md §11, §12): the
 * frames it got, in order, its close, and waiting for the nth frame of a kind.
 */
import { request } from 'undici';
import WebSocket from 'ws';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';

export interface Client {
  ws: WebSocket;
  frames: Array<Record<string, unknown>>;
  closed: Promise<{ code: number; reason: string }>;
  send(event: unknown): void;
  next(kind: string, nth?: number): Promise<Record<string, unknown>>;
}

/** Opens a session on the gateway at `url`; the socket is added to `clients` (terminated in teardown). */
export function openSession(url: string, clients: WebSocket[], options: WebSocket.ClientOptions = {}): Promise<Client> {
  const ws = new WebSocket(`${url.replace('http', 'ws')}/api/v4/ai/duo_workflows/ws`, options);
  clients.push(ws);
  const frames: Client['frames'] = [];
  const waiters: Array<() => void> = [];
  ws.on('message', (data: Buffer) => {
    frames.push(JSON.parse(data.toString('utf8')) as Record<string, unknown>);
    for (const wake of waiters.splice(0)) wake();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  const client: Client = {
    ws,
    frames,
    closed,
    send: (event) => ws.send(JSON.stringify(event)),
    next: async (kind, nth = 1) => {
      for (;;) {
        const found = frames.filter((f) => f[kind] !== undefined && f[kind] !== null)[nth - 1];
        if (found) return found;
        await new Promise<void>((resolve, reject) => {
          waiters.push(resolve);
          ws.once('close', () => reject(new Error(`closed before ${kind} #${nth}`)));
        });
      }
    },
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(client));
    ws.once('error', reject);
  });
}

export const start = (workflowID: string, steps: Step[] | undefined, extra: Record<string, unknown> = {}) => ({
  startRequest: { workflowID, goal: steps ? 'the goal' : '', ...(steps ? { workflowMetadata: scenarioMetadata(steps) } : {}), ...extra },
});
/** What a client sends to resume: its workflow, no goal, no approval. */
export const resume = (workflowID: string) => start(workflowID, undefined);

export const kindOf = (frame: Record<string, unknown>): string | undefined => Object.keys(frame).find((k) => k !== 'requestID' && frame[k] !== null);

/** What /runs lists on the gateway whose ops listener is `s.opsUrl`. */
export async function runsState(s: { opsUrl: string }): Promise<Array<Record<string, unknown>>> {
  const { runs } = (await (await request(`${s.opsUrl}/runs`)).body.json()) as { runs: Array<Record<string, unknown>> };
  return runs;
}
