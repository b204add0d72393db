/**
 * gRPC channels to workflow services, reused per (URI, Secure). A workflow service
 * commonly caps concurrent streams per HTTP/2 connection (100 is usual) and streams over
 * the cap queue silently inside HTTP/2; so each target gets a small, growing set of
 * connections and a new stream goes to the least-loaded one, opening another connection
 * when all are at `streamsPerConnection`.
 */
import * as grpc from '@grpc/grpc-js';
import { duoWorkflowService, type Action, type ClientEvent } from './contract';

export type WorkflowCall = grpc.ClientDuplexStream<ClientEvent, Action>;

const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

const channelOptions: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
  // Keepalive pings find a dead connection within ~40 s on an idle hour-long stream.
  'grpc.keepalive_time_ms': 30_000,
  'grpc.keepalive_timeout_ms': 10_000,
  'grpc.keepalive_permit_without_calls': 0,
  'grpc.initial_reconnect_backoff_ms': 200,
  'grpc.max_reconnect_backoff_ms': 5_000,
  // Each pooled client must own its connection; grpc-js otherwise shares subchannels.
  'grpc.use_local_subchannel_pool': 1,
  // No retries, and no retry buffer: a bidi stream cannot be replayed anyway, and while a
  // write fits grpc-js's retry buffer it is acknowledged as soon as it is buffered — the
  // run must know when the startRequest is really on an HTTP/2 stream (the accept wait
  // counts from there). Without the buffer no run keeps copies of what it sent, either.
  'grpc.enable_retries': 0,
  'grpc.per_rpc_retry_buffer_size': 0,
};

const ServiceClient = grpc.makeGenericClientConstructor(duoWorkflowService, 'DuoWorkflow');

interface Connection {
  client: grpc.Client & { ExecuteWorkflow: (metadata: grpc.Metadata, options?: grpc.CallOptions) => WorkflowCall };
  streams: number;
}

export interface ChannelPoolOptions {
  streamsPerConnection: number;
  /** Hard ceiling on connections per target. */
  maxConnectionsPerTarget?: number;
}

export class ChannelPool {
  private readonly targets = new Map<string, Connection[]>();
  private closed = false;

  constructor(private readonly options: ChannelPoolOptions) {}

  /** Opens an ExecuteWorkflow stream to `uri`, spreading streams over the target's connections. */
  open(uri: string, secure: boolean, metadata: grpc.Metadata): WorkflowCall {
    if (this.closed) throw new Error('channel pool is closed');
    const connection = this.pick(uri, secure);
    connection.streams += 1;
    const call = connection.client.ExecuteWorkflow(metadata);
    let counted = true;
    call.once('status', () => {
      if (counted) connection.streams -= 1;
      counted = false;
    });
    return call;
  }

  private pick(uri: string, secure: boolean): Connection {
    const key = `${secure ? 'tls' : 'plain'}|${uri}`;
    let connections = this.targets.get(key);
    if (!connections) {
      connections = [];
      this.targets.set(key, connections);
    }
    let best: Connection | undefined;
    for (const c of connections) if (!best || c.streams < best.streams) best = c;
    const ceiling = this.options.maxConnectionsPerTarget ?? 1_000;
    if (best && (best.streams < this.options.streamsPerConnection || connections.length >= ceiling)) return best;
    const credentials = secure ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
    const client = new ServiceClient(uri, credentials, channelOptions) as unknown as Connection['client'];
    const created: Connection = { client, streams: 0 };
    connections.push(created);
    return created;
  }

  /** Closes every channel (open calls are cancelled by grpc-js). Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const connections of this.targets.values()) for (const c of connections) c.client.close();
    this.targets.clear();
  }
}
