/** The owner part, wired from its settings: the one client of the owner service (preauth, relays, callbacks). */
import type { Closables } from '../core/closables';
import type { Tracing } from '../observability/tracing';
import type { OwnerMetrics } from './metrics';
import { OwnerClient } from './owner-client';
import type { OwnerSettings } from './settings';

export interface OwnerDeps {
  metrics: OwnerMetrics;
  tracing: Tracing;
  closables: Closables;
}

export function createOwner(settings: OwnerSettings, deps: OwnerDeps): OwnerClient {
  return deps.closables.add(
    'owner client',
    new OwnerClient({
      ownerUrl: settings.url,
      relayUrl: settings.relayUrl,
      secret: settings.secret,
      preauthTimeoutMs: settings.preauthTimeoutMs,
      relayTimeoutMs: settings.relayTimeoutMs,
      connections: settings.connections,
      callbackAttempts: settings.callbackAttempts,
      callbackTimeoutMs: settings.callbackTimeoutMs,
      callbackConcurrency: settings.callbackConcurrency,
      jwtRefreshMs: settings.jwtRefreshMs,
      tracing: deps.tracing,
      metrics: deps.metrics,
    }),
    (o) => o.close(),
    (o) => o.destroy(),
  );
}
