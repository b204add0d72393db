/**
 * gRPC channels to workflow services, reused per (URI, Secure, caller User-Agent). A
 * workflow service commonly caps concurrent streams per HTTP/2 connection (100 is usual)
 * and streams over the cap queue silently inside HTTP/2; so each target gets a small,
 * growing set of connections and a new stream goes to the least-loaded one, opening
 * another connection when all are at `streamsPerConnection`.
 *
 * Why the User-Agent splits connections: gRPC sends `user-agent` once per connection
 * (grpc-js writes its own over any `user-agent` metadata), and Workhorse passes the
 * caller's User-Agent on to the service (docs/spec.md §4). Callers are dispatcher jobs with a
 * handful of User-Agents; past `maxUserAgentsPerTarget` distinct ones, an idle group is
 * closed to make room, or the stream goes on the plain `longrun/<version>` connections.
 */
import * as grpc from '@grpc/grpc-js';
import { metadataValue } from '../core/caller';
import { userAgent } from '../core/version';
import type { BillingCall } from './billing-stream';
import { duoWorkflowClientService, type Action, type ClientEvent } from './contract';

export type WorkflowCall = grpc.ClientDuplexStream<ClientEvent, Action>;

const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/** The longest caller User-Agent passed on (a header, not a payload). */
const MAX_USER_AGENT_LENGTH = 256;

const ServiceClient = grpc.makeGenericClientConstructor(duoWorkflowClientService, 'DuoWorkflow');

interface Connection {
  client: grpc.Client & {
    ExecuteWorkflow: (metadata: grpc.Metadata, options?: grpc.CallOptions) => WorkflowCall;
    TrackSelfHostedExecuteWorkflow: (metadata: grpc.Metadata, options?: grpc.CallOptions) => BillingCall;
  };
  streams: number;
}

export interface ChannelPoolOptions {
  streamsPerConnection: number;
  /** Hard ceiling on connections per target and User-Agent. */
  maxConnectionsPerTarget?: number;
  /**
   * Keepalive ping interval (default 20 000, as Workhorse). grpc-js pings this often while
   * a stream is open, whatever the traffic. The workflow service refuses pings closer than
   * its `grpc.http2.min_ping_interval_without_data_ms` (10 s for the real one) when it sends
   * nothing in between, with GOAWAY after two strikes: keep this above that.
   */
  keepaliveTimeMs?: number;
  /** How long a ping may go unanswered before the connection, and every call on it, is dropped (default 20 000). */
  keepaliveTimeoutMs?: number;
  /** Ping idle connections too (default true, as Workhorse: the real service permits it). */
  keepaliveWithoutCalls?: boolean;
  /** Distinct caller User-Agents given their own connections, per target (default 32). */
  maxUserAgentsPerTarget?: number;
}

/** The `user-agent` a channel sends: the caller's, then longrun's (grpc-js appends its own). */
function channelUserAgent(callerUserAgent: string): string {
  return callerUserAgent ? `${callerUserAgent} ${userAgent}` : userAgent;
}

/** The options of every channel the pool opens (the benchmarks' raw client uses them too). */
export function channelOptions(options: Pick<ChannelPoolOptions, 'keepaliveTimeMs' | 'keepaliveTimeoutMs' | 'keepaliveWithoutCalls'>): grpc.ChannelOptions {
  return {
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
    'grpc.keepalive_time_ms': options.keepaliveTimeMs ?? 20_000,
    'grpc.keepalive_timeout_ms': options.keepaliveTimeoutMs ?? 20_000,
    'grpc.keepalive_permit_without_calls': (options.keepaliveWithoutCalls ?? true) ? 1 : 0,
    'grpc.initial_reconnect_backoff_ms': 200,
    'grpc.max_reconnect_backoff_ms': 5_000,
    // Each pooled client must own its connection; grpc-js otherwise shares subchannels.
    'grpc.use_local_subchannel_pool': 1,
    // No retries, and no retry buffer: a bidi stream cannot be replayed anyway, and while
    // a write fits grpc-js's retry buffer it is acknowledged as soon as it is buffered —
    // the run must know when the startRequest is really on an HTTP/2 stream (the accept
    // wait counts from there). Without the buffer no run keeps copies of what it sent.
    'grpc.enable_retries': 0,
    'grpc.per_rpc_retry_buffer_size': 0,
  };
}

export class ChannelPool {
  /** target key → caller User-Agent ('' = none) → connections. */
  private readonly targets = new Map<string, Map<string, Connection[]>>();
  private readonly channelOptions: grpc.ChannelOptions;
  private closed = false;

  constructor(private readonly options: ChannelPoolOptions) {
    this.channelOptions = channelOptions(options);
  }

  /**
   * Opens an ExecuteWorkflow stream to `uri`, spreading streams over the target's
   * connections; `callerUserAgent` (the execute request's User-Agent) is sent as the
   * connection's user-agent.
   */
  open(uri: string, secure: boolean, metadata: grpc.Metadata, callerUserAgent?: string): WorkflowCall {
    if (this.closed) throw new Error('channel pool is closed');
    const connection = this.pick(uri, secure, metadataValue(callerUserAgent, MAX_USER_AGENT_LENGTH) ?? '');
    connection.streams += 1;
    // grpc-js captures a stack trace with every call it opens (for the error it builds if
    // the call fails) and keeps it for the call's life: for an hour-long stream, held by
    // thousands, that is memory and stack formatting for an error nobody reads.
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    let call: WorkflowCall;
    try {
      call = connection.client.ExecuteWorkflow(metadata);
    } finally {
      Error.stackTraceLimit = stackTraceLimit;
    }
    let counted = true;
    call.once('status', () => {
      if (counted) connection.streams -= 1;
      counted = false;
    });
    return call;
  }

  /** Opens a TrackSelfHostedExecuteWorkflow stream (self-hosted billing) to `uri`, on the pool's connections. */
  openBilling(uri: string, secure: boolean, metadata: grpc.Metadata, callerUserAgent?: string): BillingCall {
    if (this.closed) throw new Error('channel pool is closed');
    const connection = this.pick(uri, secure, metadataValue(callerUserAgent, MAX_USER_AGENT_LENGTH) ?? '');
    connection.streams += 1;
    const call = connection.client.TrackSelfHostedExecuteWorkflow(metadata);
    call.once('status', () => (connection.streams -= 1));
    return call;
  }

  private group(uri: string, secure: boolean, userAgent: string): { connections: Connection[]; userAgent: string } {
    const key = `${secure ? 'tls' : 'plain'}|${uri}`;
    let groups = this.targets.get(key);
    if (!groups) {
      groups = new Map();
      this.targets.set(key, groups);
    }
    let connections = groups.get(userAgent);
    if (connections) return { connections, userAgent };
    const limit = this.options.maxUserAgentsPerTarget ?? 32;
    const agents = [...groups.keys()].filter((ua) => ua !== '');
    if (userAgent !== '' && agents.length >= limit) {
      const idle = agents.find((ua) => groups.get(ua)?.every((c) => c.streams === 0));
      if (idle === undefined) return this.group(uri, secure, '');
      for (const c of groups.get(idle) ?? []) c.client.close();
      groups.delete(idle);
    }
    connections = [];
    groups.set(userAgent, connections);
    return { connections, userAgent };
  }

  private pick(uri: string, secure: boolean, callerUserAgent: string): Connection {
    const { connections, userAgent } = this.group(uri, secure, callerUserAgent);
    let best: Connection | undefined;
    for (const c of connections) if (!best || c.streams < best.streams) best = c;
    const ceiling = this.options.maxConnectionsPerTarget ?? 1_000;
    if (best && (best.streams < this.options.streamsPerConnection || connections.length >= ceiling)) return best;
    const credentials = secure ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
    const options = { ...this.channelOptions, 'grpc.primary_user_agent': channelUserAgent(userAgent) };
    const client = new ServiceClient(uri, credentials, options) as unknown as Connection['client'];
    const created: Connection = { client, streams: 0 };
    connections.push(created);
    return created;
  }

  /** Streams open now, and the connections and targets pooled for them (/debug/structures). */
  get held(): { streams: number; connections: number; targets: number } {
    let streams = 0;
    let connections = 0;
    for (const groups of this.targets.values()) {
      for (const group of groups.values()) {
        connections += group.length;
        for (const c of group) streams += c.streams;
      }
    }
    return { streams, connections, targets: this.targets.size };
  }

  /** Closes every channel (open calls are cancelled by grpc-js). Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const groups of this.targets.values()) for (const connections of groups.values()) for (const c of connections) c.client.close();
    this.targets.clear();
  }
}
