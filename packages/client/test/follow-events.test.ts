/**
 * follow() reads each event's data with its schema (src/follow-events.ts): data of the wrong
 * shape is UNEXPECTED_RESPONSE, as data that is not JSON; a field it does not know is kept.
 * Against a plain HTTP server on loopback that answers the events given.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LongrunClient } from '../src/client';
import { LongrunError } from '../src/errors';
import type { FollowEvent } from '../src/follow';

let server: http.Server | undefined;
let client: LongrunClient | undefined;

afterEach(async () => {
  await client?.close();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
  client = undefined;
});

/** A server answering every request with these Server-Sent Events, then ending the stream. */
async function serving(events: string): Promise<LongrunClient> {
  server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(events);
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  client = new LongrunClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, retry: { maxAttempts: 1 } });
  return client;
}

async function read(c: LongrunClient): Promise<FollowEvent[]> {
  const events: FollowEvent[] = [];
  for await (const event of c.follow('7')) events.push(event);
  return events;
}

describe('follow() reading event data', () => {
  it('yields data that matches its event, unknown fields kept', async () => {
    const c = await serving(
      'id: 1\nevent: run\ndata: {"run_id":"r","transport":"detached","replica":"a","started_at":"t","state":"running","new_field":1}\n\nevent: idle\ndata: {"workflow_id":"7"}\n\n',
    );
    const events = await read(c);
    expect(events).toEqual([
      { event: 'run', id: 1, data: { run_id: 'r', transport: 'detached', replica: 'a', started_at: 't', state: 'running', new_field: 1 } },
      { event: 'idle', id: undefined, data: { workflow_id: '7' } },
    ]);
  });

  it('throws UNEXPECTED_RESPONSE for data of the wrong shape, as for data that is not JSON', async () => {
    for (const data of ['{"run_id":5}', '{"run_id":"r","reason":"not_a_reason","in_flight":[],"resumable":true}', 'not json']) {
      const event = data.includes('reason') ? 'end' : 'run';
      const c = await serving(`id: 1\nevent: ${event}\ndata: ${data}\n\n`);
      const error = await read(c).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(error, data).toBeInstanceOf(LongrunError);
      expect([(error as LongrunError).code, (error as LongrunError).message], data).toEqual([
        'UNEXPECTED_RESPONSE',
        expect.stringMatching(new RegExp(`^an unreadable ${event} event from http://`)),
      ]);
      await client?.close();
      await new Promise<void>((resolve) => server?.close(() => resolve()));
      server = undefined;
      client = undefined;
    }
  });
});
