/**
 * Server-Sent Events read from a response body, as the WHATWG HTML standard's event stream
 * interpretation reads them (§9.2.6): lines end with CRLF, LF or CR; `:` starts a comment;
 * `data` lines join with newlines; `event`, `id` (not holding NUL) and `retry` fields; a
 * blank line dispatches the event gathered, if it has data. A leading BOM is skipped.
 */
import { StringDecoder } from 'node:string_decoder';

export interface ServerSentEvent {
  /** The event's `id:` field; undefined when it had none. */
  id: string | undefined;
  /** `event:`, or `message` when absent. */
  event: string;
  data: string;
  /** `retry:` when the event carried one (ms). */
  retry?: number;
}

/** The events of `body`, in order, as they arrive; comments (keepalives) are skipped. */
export async function* serverSentEvents(body: AsyncIterable<Buffer | string>): AsyncGenerator<ServerSentEvent> {
  const decoder = new StringDecoder('utf8');
  let buffer = '';
  let first = true;
  let data: string[] = [];
  let event = '';
  let id: string | undefined;
  let retry: number | undefined;
  const line = (text: string): ServerSentEvent | undefined => {
    if (text === '') {
      const gathered = data.length > 0 ? { id, event: event || 'message', data: data.join('\n'), ...(retry === undefined ? {} : { retry }) } : undefined;
      data = [];
      event = '';
      id = undefined;
      retry = undefined;
      return gathered;
    }
    if (text.startsWith(':')) return undefined;
    const colon = text.indexOf(':');
    const name = colon < 0 ? text : text.slice(0, colon);
    const value = colon < 0 ? '' : text.slice(colon + 1).replace(/^ /, '');
    if (name === 'data') data.push(value);
    else if (name === 'event') event = value;
    else if (name === 'id' && !value.includes('\0')) id = value;
    else if (name === 'retry' && /^\d+$/.test(value)) retry = Number(value);
    return undefined;
  };
  for await (const chunk of body) {
    buffer += typeof chunk === 'string' ? chunk : decoder.write(chunk);
    if (first && buffer.length > 0) {
      if (buffer.charCodeAt(0) === 0xfeff) buffer = buffer.slice(1);
      first = false;
    }
    for (;;) {
      const end = buffer.search(/\r\n|\r|\n/);
      // A lone CR at the end may be the first half of a CRLF: wait for what follows.
      if (end < 0 || (end === buffer.length - 1 && buffer[end] === '\r')) break;
      const text = buffer.slice(0, end);
      buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
      const dispatched = line(text);
      if (dispatched) yield dispatched;
    }
  }
}
