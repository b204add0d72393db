/** The MCP part, wired from its settings: the connector that opens each run's MCP tools. */
import type { Closables } from '../core/closables';
import type { Logger } from '../core/log';
import type { Tracing } from '../observability/tracing';
import type { OwnerSettings } from '../owner/settings';
import { McpConnector } from './connector';
import type { McpMetrics } from './metrics';
import type { McpSettings } from './settings';

export interface McpDeps {
  /** The owner's own MCP servers are called at its URL, with a JWT of its secret. */
  owner: Pick<OwnerSettings, 'url' | 'secret' | 'jwtRefreshMs'>;
  metrics: McpMetrics;
  logger: Logger;
  tracing: Tracing;
  closables: Closables;
}

export function createMcp(settings: McpSettings, deps: McpDeps): McpConnector {
  return deps.closables.add(
    'mcp connector',
    new McpConnector({
      ownerUrl: deps.owner.url,
      secret: deps.owner.secret,
      jwtRefreshMs: deps.owner.jwtRefreshMs,
      callTimeoutMs: settings.callTimeoutMs,
      allowPrivate: settings.allowPrivate,
      metrics: deps.metrics,
      logger: deps.logger,
      tracing: deps.tracing,
    }),
    (m) => m.close(),
  );
}
