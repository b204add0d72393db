/** The observability part, wired from its settings: the process's tracing (docs/spec.md §13), closed with the process. */
import type { Closables } from '../core/closables';
import type { Logger } from '../core/log';
import type { Metrics } from './metrics';
import type { ObservabilitySettings } from './settings';
import { startTracing } from './trace-export';
import type { Tracing } from './tracing';

/** The longest the exporter may take to send the last spans when the gateway closes (a drain gives it less: drain.ts). */
const TRACE_FLUSH_MS = 1_000;

export interface TracingDeps {
  metrics: Metrics;
  logger: Logger;
  /** This replica's name: the spans' service.instance.id. */
  replicaId: string;
  closables: Closables;
}

/** Starts the tracing the settings ask for (Tracing.OFF without a collector), closed with what it has left to send. */
export function createTracing(settings: ObservabilitySettings, deps: TracingDeps): Tracing {
  return deps.closables.add(
    'tracing',
    startTracing(settings.tracing, { metrics: deps.metrics, logger: deps.logger, instanceId: deps.replicaId }),
    (t) => t.close(TRACE_FLUSH_MS),
    (t) => void t.close(0),
  );
}
