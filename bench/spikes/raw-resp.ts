/**
 * A minimal Redis client on one net.Socket, the lean end of the Redis comparison: commands
 * issued in one turn of the event loop are written together in one socket.write on
 * setImmediate (the turn ioredis's auto-pipelining also waits for), and replies are
 * matched to commands in order. The parser reads RESP2 replies (+ - : $ *), nothing else.
 *
 * The deadline is the socket's idle timeout while commands are out (one timer, re-armed
 * by Node on activity) rather than a timer per command.
 */
import net from 'node:net';

export type RespValue = string | number | null | RespValue[];

interface Waiter {
  resolve: (value: RespValue) => void;
  reject: (err: Error) => void;
}

/** The reply starting at `at`, and where the next one starts; undefined while incomplete. */
function parse(buffer: Buffer, at: number): { value: RespValue | Error; next: number } | undefined {
  const eol = buffer.indexOf('\r\n', at, 'latin1');
  if (eol < 0) return undefined;
  const type = buffer[at];
  const line = buffer.toString('latin1', at + 1, eol);
  switch (type) {
    case 0x2b: // +
      return { value: line, next: eol + 2 };
    case 0x2d: // -
      return { value: new Error(line), next: eol + 2 };
    case 0x3a: // :
      return { value: Number(line), next: eol + 2 };
    case 0x24: {
      // $
      const length = Number(line);
      if (length < 0) return { value: null, next: eol + 2 };
      const end = eol + 2 + length;
      if (buffer.length < end + 2) return undefined;
      return { value: buffer.toString('utf8', eol + 2, end), next: end + 2 };
    }
    case 0x2a: {
      // *
      const count = Number(line);
      if (count < 0) return { value: null, next: eol + 2 };
      const items: RespValue[] = [];
      let next = eol + 2;
      for (let i = 0; i < count; i++) {
        const item = parse(buffer, next);
        if (!item) return undefined;
        if (item.value instanceof Error) return item;
        items.push(item.value);
        next = item.next;
      }
      return { value: items, next };
    }
    default:
      throw new Error(`unexpected RESP type byte ${type}`);
  }
}

function encode(args: readonly string[]): string {
  let out = `*${args.length}\r\n`;
  for (const arg of args) out += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
  return out;
}

export class RawRedis {
  private readonly socket: net.Socket;
  private readonly waiters: Waiter[] = [];
  private outgoing: string[] = [];
  private flushScheduled = false;
  private buffer: Buffer = Buffer.alloc(0);
  readonly connected: Promise<void>;

  constructor(
    url: URL,
    private readonly timeoutMs: number,
  ) {
    this.socket = net.connect({ host: url.hostname, port: Number(url.port), noDelay: true });
    this.connected = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('timeout', () => this.socket.destroy(new Error(`no reply within ${timeoutMs} ms`)));
    this.socket.on('error', () => undefined);
    this.socket.on('close', () => {
      for (const waiter of this.waiters.splice(0)) waiter.reject(new Error('connection closed'));
    });
  }

  /** Sends one command (written with the others of this turn); resolves with its reply. */
  command(args: readonly string[]): Promise<RespValue> {
    if (this.socket.destroyed) return Promise.reject(new Error('connection closed'));
    this.outgoing.push(encode(args));
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
    return new Promise((resolve, reject) => {
      if (this.waiters.length === 0) this.socket.setTimeout(this.timeoutMs);
      this.waiters.push({ resolve, reject });
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const batch = this.outgoing.length === 1 ? (this.outgoing[0] as string) : this.outgoing.join('');
    this.outgoing = [];
    this.socket.write(batch);
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    let at = 0;
    for (;;) {
      const reply = parse(this.buffer, at);
      if (!reply) break;
      at = reply.next;
      const waiter = this.waiters.shift();
      if (reply.value instanceof Error) waiter?.reject(reply.value);
      else waiter?.resolve(reply.value);
      if (at >= this.buffer.length) break;
    }
    this.buffer = at >= this.buffer.length ? Buffer.alloc(0) : this.buffer.subarray(at);
    if (this.waiters.length === 0) this.socket.setTimeout(0);
  }

  close(): void {
    this.socket.destroy();
  }
}
