/** The workflow section of the configuration (docs/configuration.md "Workflow service"): the gRPC channel pool's connections and keepalive. */
import { readFlag, readInt, readMs, type Env } from '../core/env';

export interface WorkflowSettings {
  /** Streams per gRPC connection before another connection to the same target is opened (100: the usual per-connection stream cap of gRPC servers). */
  streamsPerConnection: number;
  /** gRPC keepalive ping interval; a ping unanswered for keepaliveTimeoutMs ends every call on its connection (docs/spec.md §4). */
  keepaliveTimeMs: number;
  keepaliveTimeoutMs: number;
  /** Ping idle gRPC connections too (the real service permits it; a default gRPC server does not). */
  keepaliveWithoutCalls: boolean;
}

export function readWorkflowSettings(env: Env): WorkflowSettings {
  return {
    streamsPerConnection: readInt(env, 'LONGRUN_GRPC_STREAMS_PER_CONNECTION', 1, 10_000, 100),
    // 20 s and 20 s: Workhorse's keepalive (and gRPC-Go's default timeout). The real service
    // accepts pings 10 s apart (min_ping_interval_without_data_ms), so 20 s is never a strike.
    keepaliveTimeMs: readMs(env, 'LONGRUN_GRPC_KEEPALIVE_TIME_MS', 20_000),
    keepaliveTimeoutMs: readMs(env, 'LONGRUN_GRPC_KEEPALIVE_TIMEOUT_MS', 20_000),
    keepaliveWithoutCalls: readFlag(env, 'LONGRUN_GRPC_KEEPALIVE_WITHOUT_CALLS', true),
  };
}
