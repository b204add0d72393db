/**
 * A TCP front for the simulated workflow service that reads the HTTP/2 frames going
 * through it, to play two things a grpc-js server does not:
 *
 * - the real service's ping policy. The workflow service runs on gRPC core with
 *   `grpc.http2.min_ping_interval_without_data_ms` (10 s) and the default of two ping
 *   strikes: a client PING closer than that to the previous one, with no DATA or HEADERS
 *   sent by the server in between, is a strike, and past the strikes the server sends
 *   GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and closes the connection (every call on it
 *   ends). A gateway that pings too often loses its runs; the front makes that visible.
 * - a connection that goes dead without closing (a black hole: a dropped route, a frozen
 *   peer): nothing is forwarded either way and no socket is closed, so only keepalive
 *   pings can tell.
 *
 * Server → client bytes are forwarded whole frames at a time, so a GOAWAY can be put
 * between two frames. With `latencyMs`, every chunk is held that long each way (a wire
 * between zones), so what the two sides send can cross.
 */
import { EventEmitter } from 'node:events';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface PingPolicy {
  /** Least time between two client pings when the server sent no DATA or HEADERS in between. */
  minPingIntervalWithoutDataMs: number;
  /** Strikes tolerated; the next one is answered with GOAWAY (0 = never). */
  maxPingStrikes: number;
}

/** gRPC core's defaults as the real workflow service sets them (10 s, 2 strikes). */
export const workflowServicePingPolicy: PingPolicy = { minPingIntervalWithoutDataMs: 10_000, maxPingStrikes: 2 };

const PREFACE_LENGTH = 24;
const FRAME_HEADER_LENGTH = 9;
const DATA = 0x0;
const HEADERS = 0x1;
const PING = 0x6;
const GOAWAY = 0x7;
const ACK = 0x1;
const ENHANCE_YOUR_CALM = 0xb;

interface Frame {
  type: number;
  flags: number;
  streamId: number;
  raw: Buffer;
}

/** Cuts a byte stream into whole HTTP/2 frames (after `skip` bytes of connection preface). */
class FrameReader {
  private pending: Buffer = Buffer.alloc(0);

  constructor(private skip: number) {}

  push(chunk: Buffer): Frame[] {
    let data = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    if (this.skip > 0) {
      const skipped = Math.min(this.skip, data.length);
      this.skip -= skipped;
      data = data.subarray(skipped);
    }
    const frames: Frame[] = [];
    let offset = 0;
    while (data.length - offset >= FRAME_HEADER_LENGTH) {
      const length = data.readUIntBE(offset, 3);
      const end = offset + FRAME_HEADER_LENGTH + length;
      if (data.length < end) break;
      frames.push({
        type: data[offset + 3] as number,
        flags: data[offset + 4] as number,
        streamId: data.readUInt32BE(offset + 5) & 0x7fffffff,
        raw: data.subarray(offset, end),
      });
      offset = end;
    }
    this.pending = Buffer.from(data.subarray(offset));
    return frames;
  }
}

function goawayFrame(lastStreamId: number, debug: string): Buffer {
  const payload = Buffer.alloc(8 + Buffer.byteLength(debug));
  payload.writeUInt32BE(lastStreamId & 0x7fffffff, 0);
  payload.writeUInt32BE(ENHANCE_YOUR_CALM, 4);
  payload.write(debug, 8);
  const header = Buffer.alloc(FRAME_HEADER_LENGTH);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = GOAWAY;
  return Buffer.concat([header, payload]);
}

interface Link {
  client: net.Socket;
  upstream: net.Socket;
  blackHoled: boolean;
}

export class H2Front {
  /** Client PINGs (not acks) seen, over all connections. */
  pingsReceived = 0;
  /** GOAWAY too_many_pings sent. */
  goaways = 0;
  private readonly links = new Set<Link>();
  private readonly events = new EventEmitter();
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly server: net.Server,
    readonly host: string,
    readonly port: number,
  ) {}

  /** Listens on `host` (default 127.0.0.1) and `port` (default 0: any), in front of `target`. */
  static async start(target: { host: string; port: number }, options: { host?: string; port?: number; pingPolicy?: PingPolicy; latencyMs?: number } = {}): Promise<H2Front> {
    let front: H2Front | undefined;
    const server = net.createServer((client) => front?.accept(client, target, options.pingPolicy, options.latencyMs ?? 0));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
    });
    const { address, port } = server.address() as AddressInfo;
    front = new H2Front(server, address, port);
    return front;
  }

  /** Connections currently open through the front. */
  get connections(): number {
    return this.links.size;
  }

  /** Stops forwarding on every open connection, both ways, without closing anything. */
  blackHole(): void {
    for (const link of this.links) link.blackHoled = true;
  }

  /** Calls `listener` on every ping seen and GOAWAY sent. */
  onChange(listener: () => void): () => void {
    this.events.on('change', listener);
    return () => this.events.off('change', listener);
  }

  /** Closes the listener and every connection. Idempotent. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const link of this.links) {
        link.client.destroy();
        link.upstream.destroy();
      }
      this.links.clear();
    });
    return this.closing;
  }

  private accept(client: net.Socket, target: { host: string; port: number }, policy: PingPolicy | undefined, latencyMs: number): void {
    const upstream = net.connect(target.port, target.host);
    const link: Link = { client, upstream, blackHoled: false };
    this.links.add(link);
    const fromClient = new FrameReader(PREFACE_LENGTH);
    const fromServer = new FrameReader(0);
    // gRPC core's state: the last ping time is "long ago" (any ping allowed) after the server sends DATA or HEADERS.
    let lastPingAt: number | undefined;
    let strikes = 0;
    let lastStreamId = 0;
    // False once a GOAWAY is on its way: the client closes the connection when it reads it.
    let forwarding = true;

    const teardown = (): void => {
      this.links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', teardown).on('close', teardown);
    upstream.on('error', () => forwarding && teardown()).on('close', () => forwarding && teardown());

    // Equal delays fire in order: the bytes keep theirs.
    const later = (socket: net.Socket, bytes: Buffer): void => {
      if (latencyMs === 0) socket.write(bytes);
      else setTimeout(() => !socket.destroyed && socket.write(bytes), latencyMs);
    };
    client.on('data', (chunk: Buffer) => {
      if (link.blackHoled || !forwarding) return;
      later(upstream, chunk);
      for (const frame of fromClient.push(chunk)) {
        if (frame.type === HEADERS) lastStreamId = Math.max(lastStreamId, frame.streamId);
        if (frame.type !== PING || (frame.flags & ACK) !== 0) continue;
        this.pingsReceived += 1;
        this.events.emit('change');
        if (!policy) continue;
        const now = Date.now();
        if (lastPingAt !== undefined && now - lastPingAt < policy.minPingIntervalWithoutDataMs) strikes += 1;
        lastPingAt = now;
        if (policy.maxPingStrikes !== 0 && strikes > policy.maxPingStrikes) {
          this.goaways += 1;
          this.events.emit('change');
          forwarding = false;
          upstream.destroy();
          client.end(goawayFrame(lastStreamId, 'too_many_pings'));
          return;
        }
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      if (link.blackHoled || !forwarding) return;
      const frames = fromServer.push(chunk);
      for (const frame of frames) {
        if (frame.type === DATA || frame.type === HEADERS) {
          lastPingAt = undefined;
          strikes = 0;
        }
      }
      if (frames.length > 0) later(client, Buffer.concat(frames.map((f) => f.raw)));
    });
  }
}
