/**
 * The label words of longrun's metrics that belong to features above observability/, each
 * from the feature that owns it. metrics.ts sits below those features and imports none of
 * them; this file, on the floor that assembles the process, hands them in (gateway.ts, and
 * tests that read metrics).
 */
import { callbackResults, relayErrorTypes } from './owner/words';
import { leaseBatchOps, lockOps, lockOutcomes, lockResults, redisConnections, redisEvents } from './coordination/words';
import { bridgeBreakWhys, parkEndReasons } from './websocket/words';
import { followDropReasons, followEventKinds } from './follow/words';
import { mcpCallResults, mcpDiscoveryFailures, mcpServerKinds } from './mcp/words';
import { acceptedOn, capKinds } from './run/words';
import type { MetricWords } from './observability/metrics';

export const metricWords: MetricWords = Object.freeze({
  acceptedOn,
  capKinds,
  lockOps,
  lockResults,
  lockOutcomes,
  leaseBatchOps,
  redisConnections,
  redisEvents,
  relayErrorTypes,
  callbackResults,
  mcpServerKinds,
  mcpCallResults,
  mcpDiscoveryFailures,
  parkEndReasons,
  bridgeBreakWhys,
  followEventKinds,
  followDropReasons,
});
