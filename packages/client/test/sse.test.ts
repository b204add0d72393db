/**
 * @longrun/client's Server-Sent Events reader (packages/client/src/sse.ts) against the format (WHATWG
 * HTML §9.2.6): line endings of every kind, comments, multi-line data, fields without a
 * value, a BOM, events with no data, and any split of the bytes into chunks (fast-check).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { serverSentEvents, type ServerSentEvent } from '../src/sse';

async function read(chunks: Array<string | Buffer>): Promise<ServerSentEvent[]> {
  const out: ServerSentEvent[] = [];
  for await (const event of serverSentEvents(
    (async function* () {
      yield* chunks;
    })(),
  ))
    out.push(event);
  return out;
}

const STREAM =
  '\uFEFF: keepalive\r\nid: 7\nevent: run\ndata: {"a":1}\n\n' +
  'id: 8\revent: checkpoint\rdata: line one\rdata: line two\r\r' +
  ': comment\r\n\r\n' +
  'event: idle\r\ndata\r\nretry: 3000\r\n\r\n' +
  'event: nodata\n\n' +
  'data:  two spaces\nid: has\0nul\n\n';

const EXPECTED: ServerSentEvent[] = [
  { id: '7', event: 'run', data: '{"a":1}' },
  { id: '8', event: 'checkpoint', data: 'line one\nline two' },
  { id: undefined, event: 'idle', data: '', retry: 3000 },
  { id: undefined, event: 'message', data: ' two spaces' },
];

describe('serverSentEvents', () => {
  it('reads every line ending, comment, field and event as the standard does', async () => {
    expect(await read([STREAM])).toEqual(EXPECTED);
  });

  it('reads the same events however the bytes are split into chunks (a multi-byte character too)', async () => {
    const bytes = Buffer.from(`${STREAM}data: é€😀\n\n`);
    const expected = [...EXPECTED, { id: undefined, event: 'message', data: 'é€😀' }];
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 20 }), async (cuts) => {
        const at = [0, ...[...cuts].sort((a, b) => a - b), bytes.length];
        const chunks = at.slice(1).map((end, i) => bytes.subarray(at[i], end));
        expect(await read(chunks)).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });
});
