/**
 * A minimal HTTP/1.1 client on net.Socket, the lean end of the HTTP comparison: keep-alive
 * connections (up to `connections`), one request in flight per connection, each request
 * one socket.write of head and body together. The parser knows Content-Length answers
 * only (no chunked, no 1xx, no trailers): enough for the owner's JSON answers, and the
 * spike measures what a client needs to do the same wire work, not a general client.
 *
 * The deadline is the socket's idle timeout while a request is out (Node re-arms one
 * timer on activity) rather than a timer per request.
 */
import net from 'node:net';

export interface RawResponse {
  status: number;
  body: Buffer;
}

interface Pending {
  head: string;
  body: string;
  resolve: (response: RawResponse) => void;
  reject: (err: Error) => void;
}

const HEAD_END = Buffer.from('\r\n\r\n');

class Connection {
  private readonly socket: net.Socket;
  private current: Pending | undefined;
  private buffer: Buffer = Buffer.alloc(0);
  /** Parsed head of the answer being read: its status and the body length still to come. */
  private answer: { status: number; length: number; headBytes: number } | undefined;

  constructor(
    host: string,
    port: number,
    private readonly timeoutMs: number,
    private readonly onIdle: (c: Connection) => void,
    private readonly onGone: (c: Connection) => void,
  ) {
    this.socket = net.connect({ host, port, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('timeout', () => this.socket.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    this.socket.on('error', () => undefined);
    this.socket.on('close', () => {
      this.current?.reject(new Error('connection closed'));
      this.current = undefined;
      this.onGone(this);
    });
  }

  send(request: Pending): void {
    this.current = request;
    this.socket.setTimeout(this.timeoutMs);
    this.socket.write(request.head + request.body);
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    if (!this.answer) {
      const end = this.buffer.indexOf(HEAD_END);
      if (end < 0) return;
      const head = this.buffer.toString('latin1', 0, end);
      const status = Number(head.slice(9, 12));
      const match = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head);
      if (!match || !head.startsWith('HTTP/1.1 ')) {
        this.socket.destroy(new Error('answer without Content-Length (this client reads no other kind)'));
        return;
      }
      this.answer = { status, length: Number(match[1]), headBytes: end + HEAD_END.length };
    }
    const { status, length, headBytes } = this.answer;
    if (this.buffer.length < headBytes + length) return;
    const body = this.buffer.subarray(headBytes, headBytes + length);
    this.buffer = this.buffer.subarray(headBytes + length);
    this.answer = undefined;
    const done = this.current;
    this.current = undefined;
    this.socket.setTimeout(0);
    done?.resolve({ status, body });
    this.onIdle(this);
  }

  close(): void {
    this.socket.destroy();
  }
}

export class RawHttpClient {
  private readonly idle: Connection[] = [];
  private readonly all = new Set<Connection>();
  private readonly queue: Pending[] = [];
  private readonly host: string;
  private readonly port: number;
  private readonly hostHeader: string;

  constructor(
    origin: URL,
    private readonly connections: number,
    private readonly timeoutMs: number,
  ) {
    this.host = origin.hostname;
    this.port = Number(origin.port);
    this.hostHeader = origin.host;
  }

  /** POSTs `body` (a string) to `path` with `headers` (lower-case names, no Host or Content-Length). */
  post(path: string, headers: Readonly<Record<string, string>>, body: string): Promise<RawResponse> {
    let head = `POST ${path} HTTP/1.1\r\nhost: ${this.hostHeader}\r\n`;
    for (const name in headers) head += `${name}: ${headers[name]}\r\n`;
    head += `content-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    return new Promise((resolve, reject) => {
      this.dispatch({ head, body, resolve, reject });
    });
  }

  private dispatch(request: Pending): void {
    const connection = this.idle.pop() ?? (this.all.size < this.connections ? this.open() : undefined);
    if (connection) connection.send(request);
    else this.queue.push(request);
  }

  private open(): Connection {
    const connection = new Connection(
      this.host,
      this.port,
      this.timeoutMs,
      (c) => {
        const next = this.queue.shift();
        if (next) c.send(next);
        else this.idle.push(c);
      },
      (c) => {
        this.all.delete(c);
        const at = this.idle.indexOf(c);
        if (at >= 0) this.idle.splice(at, 1);
        const next = this.queue.shift();
        if (next) this.dispatch(next);
      },
    );
    this.all.add(connection);
    return connection;
  }

  close(): void {
    for (const connection of this.all) connection.close();
    for (const request of this.queue.splice(0)) request.reject(new Error('client closed'));
  }
}
