/**
 * Readers for the follow benchmark (docs/spec.md §10 `follow`): a follower of the follow route
 * (Server-Sent Events) and a blocking caller (ndjson), each noting, for every checkpoint the
 * workflow simulator stamped with its send time ("…@<epoch ms>", scenario.ts), how long it
 * took to arrive here. The simulator and this driver share the machine's clock.
 */
import { request } from 'undici';

/** When a stamped checkpoint was sent, from its text; undefined for one not stamped. */
function stampOf(checkpointText: unknown): number | undefined {
  const match = typeof checkpointText === 'string' ? /@(\d+\.\d+)$/.exec(checkpointText) : null;
  return match ? Number(match[1]) : undefined;
}

const now = (): number => performance.timeOrigin + performance.now();

export interface Reading {
  /** Milliseconds from the service's send to this reader, per stamped checkpoint it got live. */
  latencies: number[];
  /** Event kinds, in order (followers). */
  kinds: string[];
  /**
   * Ids not one more than the one before (followers): a gap or a repeat — after the start of
   * the stream (a follow with no position begins with the latest run and checkpoint, which
   * need not be consecutive).
   */
  idBreaks: number;
  /** Stamped checkpoints sent before this follower joined (its first event): not its to get. */
  sentBeforeJoin: number;
}

/** Follows `workflowId` on the gateway at `url` until `idle`; `joined` resolves once its first event arrived. */
export function followOnce(url: string, workflowId: string): { joined: Promise<void>; done: Promise<Reading> } {
  const reading: Reading = { latencies: [], kinds: [], idBreaks: 0, sentBeforeJoin: 0 };
  let joined!: () => void;
  let joinedAt = Number.POSITIVE_INFINITY;
  const joinedP = new Promise<void>((resolve) => (joined = resolve));
  const done = (async () => {
    const res = await request(`${url}/api/v4/ai/duo_workflows/workflows/${encodeURIComponent(workflowId)}/follow`, {
      headers: { accept: 'text/event-stream' },
      bodyTimeout: 0,
    });
    if (res.statusCode !== 200) throw new Error(`follow of ${workflowId} answered ${res.statusCode}: ${await res.body.text()}`);
    let buffer = '';
    let last: number | undefined;
    for await (const chunk of res.body) {
      buffer += (chunk as Buffer).toString('utf8');
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let kind = '';
        let data = '';
        let id: number | undefined;
        for (const line of frame.split('\n')) {
          if (line.startsWith('event: ')) kind = line.slice(7);
          else if (line.startsWith('data: ')) data = line.slice(6);
          else if (line.startsWith('id: ')) id = Number(line.slice(4));
        }
        if (kind === '') continue;
        if (reading.kinds.length === 0) {
          joinedAt = now();
          joined();
        }
        reading.kinds.push(kind);
        if (id !== undefined) {
          if (last !== undefined && id !== last + 1 && reading.kinds.length > 2) reading.idBreaks += 1;
          last = id;
        }
        if (kind === 'checkpoint') {
          const sent = stampOf((JSON.parse(data) as { newCheckpoint?: { checkpoint?: string } }).newCheckpoint?.checkpoint);
          // One sent before the follower joined came in its start (the latest checkpoint), not live.
          if (sent !== undefined && sent < joinedAt - 1) reading.sentBeforeJoin += 1;
          else if (sent !== undefined) reading.latencies.push(now() - sent);
        }
      }
    }
    return reading;
  })();
  done.catch(() => joined());
  return { joined: joinedP, done };
}

/** A blocking execute (the owner answers it blocking): the latency of each stamped checkpoint's ndjson line. */
export async function blockingOnce(url: string, workflowId: string, body: string): Promise<Reading> {
  const reading: Reading = { latencies: [], kinds: [], idBreaks: 0, sentBeforeJoin: 0 };
  const res = await request(`${url}/api/v4/ai/duo_workflows/workflows/${encodeURIComponent(workflowId)}/execute`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    bodyTimeout: 0,
  });
  if (res.statusCode !== 200) throw new Error(`blocking execute of ${workflowId} answered ${res.statusCode}: ${await res.body.text()}`);
  let buffer = '';
  for await (const chunk of res.body) {
    buffer += (chunk as Buffer).toString('utf8');
    let end: number;
    while ((end = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      if (line === '') continue;
      const sent = stampOf((JSON.parse(line) as { newCheckpoint?: { checkpoint?: string } }).newCheckpoint?.checkpoint);
      if (sent !== undefined) reading.latencies.push(now() - sent);
    }
  }
  return reading;
}
