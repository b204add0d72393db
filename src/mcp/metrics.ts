/** The MCP tools' metrics (docs/operating.md "MCP servers"): tool calls and how each went, and each run's discovery. */
import { Counter, Histogram, type Registry } from 'prom-client';
import { MS_TO_SECONDS_BUCKETS, PartMetrics } from '../observability/metric-helpers';
import { mcpCallResults, mcpDiscoveryFailures, mcpServerKinds, type McpCallResult, type McpDiscoveryFailure, type McpServerKind } from './words';

export class McpMetrics extends PartMetrics {
  readonly mcpCalls = new Counter({
    name: 'longrun_mcp_calls_total',
    help: 'runMCPTool calls for a tool a configured MCP server offers, by server kind and result.',
    labelNames: ['server_kind', 'result'],
    registers: [this.registry],
  });
  readonly mcpCallDuration = new Histogram({
    name: 'longrun_mcp_call_duration_seconds',
    help: 'runMCPTool calls made on an MCP server, from sent to answered, by server kind.',
    labelNames: ['server_kind'],
    // From a quick lookup to the call deadline (30 s default) and a little over.
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly mcpDiscoveryFailures = new Counter({
    name: 'longrun_mcp_discovery_failures_total',
    help: 'Configured MCP servers left out of a run at its start (refused, timed out or failed), by server kind and reason.',
    labelNames: ['server_kind', 'reason'],
    registers: [this.registry],
  });
  readonly mcpDiscoveryDuration = new Histogram({
    name: 'longrun_mcp_discovery_duration_seconds',
    help: 'Time to connect to and list the tools of every MCP server of a run (runs with MCP servers), before its start is sent.',
    // Bounded by the discovery deadline (5 s default) and the accept wait.
    buckets: MS_TO_SECONDS_BUCKETS,
    registers: [this.registry],
  });

  constructor(registry: Registry) {
    super(registry);
    for (const kind of mcpServerKinds) {
      this.mcpCallDuration.zero({ server_kind: kind });
      for (const result of mcpCallResults) this.mcpCalls.inc({ server_kind: kind, result }, 0);
      for (const reason of mcpDiscoveryFailures) this.mcpDiscoveryFailures.inc({ server_kind: kind, reason }, 0);
    }
  }

  /** One runMCPTool call on a server; `durationS` when the server was called. */
  mcpCall(kind: McpServerKind, result: McpCallResult, durationS?: number): void {
    this.mcpCalls.inc({ server_kind: kind, result });
    if (durationS !== undefined) this.mcpCallDuration.observe({ server_kind: kind }, durationS);
  }

  mcpDiscoveryFailure(kind: McpServerKind, reason: McpDiscoveryFailure): void {
    this.mcpDiscoveryFailures.inc({ server_kind: kind, reason });
  }

  mcpDiscovery(durationS: number): void {
    this.mcpDiscoveryDuration.observe(durationS);
  }
}
