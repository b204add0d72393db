/**
 * Every metric the gateway exposes (docs/operating.md "Metrics"), on one registry: the
 * process's own (observability/metrics.ts) and each part's, declared in the part's folder
 * with its own word lists. Each part is handed its own; /metrics reads the registry.
 */
import { CoordinationMetrics } from './coordination/metrics';
import { FollowMetrics } from './follow/metrics';
import { McpMetrics } from './mcp/metrics';
import { Metrics } from './observability/metrics';
import { OwnerMetrics } from './owner/metrics';
import { RunMetrics } from './run/metrics';
import { WebSocketMetrics } from './websocket/metrics';

export class GatewayMetrics {
  /** The registry, the process's default metrics, the build, the drain, the trace export. */
  readonly process: Metrics;
  readonly run: RunMetrics;
  readonly owner: OwnerMetrics;
  readonly mcp: McpMetrics;
  readonly coordination: CoordinationMetrics;
  readonly websocket: WebSocketMetrics;
  readonly follow: FollowMetrics;

  /** `defaultMetrics: false` leaves Node's process metrics out (tests that read the longrun_* ones only). */
  constructor(options: { defaultMetrics?: boolean } = {}) {
    this.process = new Metrics(options);
    const { registry } = this.process;
    this.run = new RunMetrics(registry);
    this.owner = new OwnerMetrics(registry);
    this.mcp = new McpMetrics(registry);
    this.coordination = new CoordinationMetrics(registry);
    this.websocket = new WebSocketMetrics(registry, this.run);
    this.follow = new FollowMetrics(registry, this.run);
  }

  get registry(): Metrics['registry'] {
    return this.process.registry;
  }
}
