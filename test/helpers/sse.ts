/**
 * A Server-Sent Events client for tests of the follow route (docs/spec.md §14), written from
 * the format (WHATWG HTML §9.2), apart from the code under test: it records every event and
 * comment as it arrives, and whether the server ended the stream.
 */
import { request } from 'undici';

export interface SseEvent {
  /** The `id:` field, as a number (undefined when the event had none). */
  id: number | undefined;
  event: string;
  data: string;
  /** `data` parsed as JSON. */
  json: Record<string, unknown>;
  /** When it arrived (epoch ms, fractional). */
  at: number;
}

export interface SseStream {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body of a non-200 answer. */
  body: string;
  events: SseEvent[];
  /** Comment lines seen (keepalives). */
  comments: string[];
  /** Resolves when the server ended the stream (or it was cut): `ended` cleanly, or `cut`. */
  closed: Promise<'ended' | 'cut'>;
  /** Resolves once an event matching `predicate` has arrived; rejects after `timeoutMs`. */
  waitFor(predicate: (events: SseEvent[]) => boolean, timeoutMs?: number, what?: string): Promise<void>;
  /** Stops reading (the client goes). */
  close(): void;
}

export async function openSse(url: string, headers: Record<string, string> = {}, options: { read?: boolean } = {}): Promise<SseStream> {
  const controller = new AbortController();
  const res = await request(url, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal, bodyTimeout: 0 });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const waiters = new Set<() => void>();
  const changed = (): void => {
    for (const waiter of [...waiters]) waiter();
  };
  if (res.statusCode !== 200) {
    const body = await res.body.text();
    return {
      status: res.statusCode,
      headers: res.headers,
      body,
      events,
      comments,
      closed: Promise.resolve('ended'),
      waitFor: () => Promise.reject(new Error(`status ${res.statusCode}: ${body}`)),
      close: () => undefined,
    };
  }
  let settled: 'ended' | 'cut' | undefined;
  const closed = (async (): Promise<'ended' | 'cut'> => {
    if (options.read === false) return new Promise<'ended' | 'cut'>(() => undefined);
    let buffer = '';
    let fields: { id?: string; event?: string; data: string[] } = { data: [] };
    try {
      for await (const chunk of res.body) {
        buffer += (chunk as Buffer).toString('utf8');
        let nl: number;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl).replace(/\r$/, '');
          buffer = buffer.slice(nl + 1);
          if (line === '') {
            if (fields.data.length > 0 || fields.event !== undefined) {
              const data = fields.data.join('\n');
              let json: Record<string, unknown> = {};
              try {
                json = JSON.parse(data) as Record<string, unknown>;
              } catch {
                // Not JSON: json stays empty.
              }
              events.push({
                id: fields.id === undefined ? undefined : Number(fields.id),
                event: fields.event ?? 'message',
                data,
                json,
                at: performance.timeOrigin + performance.now(),
              });
              changed();
            }
            fields = { data: [] };
          } else if (line.startsWith(':')) {
            comments.push(line.slice(1).trim());
            changed();
          } else {
            const colon = line.indexOf(':');
            const name = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (name === 'data') fields.data.push(value);
            else if (name === 'id') fields.id = value;
            else if (name === 'event') fields.event = value;
          }
        }
      }
      settled = 'ended';
    } catch {
      settled = 'cut';
    }
    changed();
    return settled;
  })();
  return {
    status: res.statusCode,
    headers: res.headers,
    body: '',
    events,
    comments,
    closed,
    waitFor(predicate, timeoutMs = 10_000, what = 'events') {
      if (predicate(events)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (predicate(events)) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve();
          } else if (settled !== undefined) {
            clearTimeout(timer);
            waiters.delete(check);
            reject(new Error(`stream ${settled} before ${what}: ${JSON.stringify(events.map((e) => [e.id, e.event]))}`));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no ${what} within ${timeoutMs} ms: ${JSON.stringify(events.map((e) => [e.id, e.event, e.data.slice(0, 80)]))}`));
        }, timeoutMs);
        waiters.add(check);
      });
    },
    close: () => controller.abort(),
  };
}

/** The path of a workflow's follow route. */
export function followPath(workflowId: string, query = ''): string {
  return `/api/v4/ai/duo_workflows/workflows/${workflowId}/follow${query}`;
}

/** Asserts ids strictly increase by one (a gap-free stream of one log); returns the first offending pair. */
export function firstGap(events: readonly SseEvent[]): [number | undefined, number | undefined] | undefined {
  const ids = events.filter((e) => e.id !== undefined).map((e) => e.id as number);
  for (let i = 1; i < ids.length; i++) if (ids[i] !== (ids[i - 1] as number) + 1) return [ids[i - 1], ids[i]];
  return undefined;
}
