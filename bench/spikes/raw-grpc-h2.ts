/**
 * gRPC bidi calls on a raw node:http2 client session, the lean end of the gRPC
 * comparison: one HTTP/2 connection, a stream per call with the headers a gRPC client
 * sends (`content-type: application/grpc`, `te: trailers`, metadata), messages framed with
 * the 5-byte gRPC prefix (flag 0, uint32 length), the status read from the trailers (or
 * from a trailers-only answer). No compression, no deadlines, no retries, no keepalive
 * pings, no reconnection: what the spike's calls need to do the same wire work.
 */
import http2 from 'node:http2';

export interface RawCallHandlers {
  onMessage(message: Buffer): void;
  /** The call's end: its grpc-status (2 UNKNOWN when none came) and grpc-message. */
  onEnd(code: number, details: string): void;
}

export class RawGrpcCall {
  private pending: Buffer = Buffer.alloc(0);
  private code: number | undefined;
  private details = '';

  constructor(
    private readonly stream: http2.ClientHttp2Stream,
    private readonly handlers: RawCallHandlers,
  ) {
    stream.on('response', (headers) => {
      // A trailers-only answer carries the status in its headers.
      this.readStatus(headers);
      if (headers[':status'] !== 200) this.code ??= 2;
    });
    stream.on('data', (chunk: Buffer) => this.onData(chunk));
    stream.on('trailers', (trailers) => this.readStatus(trailers));
    stream.on('error', () => undefined);
    stream.on('close', () => handlers.onEnd(this.code ?? 2, this.details || (this.code === undefined ? `stream closed (${stream.rstCode})` : '')));
  }

  private readStatus(headers: http2.IncomingHttpHeaders): void {
    const status = headers['grpc-status'];
    if (status === undefined) return;
    this.code = Number(status);
    const message = headers['grpc-message'];
    if (typeof message === 'string') this.details = decodeURIComponent(message);
  }

  private onData(chunk: Buffer): void {
    let buffer = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    while (buffer.length >= 5) {
      const length = buffer.readUInt32BE(1);
      if (buffer.length < 5 + length) break;
      if (buffer[0] !== 0) {
        this.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
        return;
      }
      this.handlers.onMessage(buffer.subarray(5, 5 + length));
      buffer = buffer.subarray(5 + length);
    }
    this.pending = buffer;
  }

  /** Writes one serialized message (prefix and message in one write). */
  write(message: Buffer): void {
    const frame = Buffer.allocUnsafe(5 + message.length);
    frame[0] = 0;
    frame.writeUInt32BE(message.length, 1);
    message.copy(frame, 5);
    this.stream.write(frame);
  }

  /** Half-closes the call (END_STREAM). */
  end(): void {
    this.stream.end();
  }
}

export class RawGrpcChannel {
  private readonly session: http2.ClientHttp2Session;

  constructor(
    address: string,
    private readonly userAgent: string,
  ) {
    this.session = http2.connect(`http://${address}`);
    this.session.on('error', () => undefined);
  }

  /** Opens a call to `path` with `metadata` (lower-case names, text values). */
  open(path: string, metadata: Readonly<Record<string, string>>, handlers: RawCallHandlers): RawGrpcCall {
    const stream = this.session.request({
      ...metadata,
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      'user-agent': this.userAgent,
    });
    return new RawGrpcCall(stream, handlers);
  }

  close(): void {
    this.session.destroy();
  }
}
