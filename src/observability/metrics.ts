/**
 * Prometheus metrics (docs/spec.md §7): the registry every part's metrics register on — one
 * of the process's own, never prom-client's global one, so two gateways in one test process
 * do not collide — with the process's default metrics and what belongs to no one part: the
 * build, the drain, the trace export. Each part declares its own metrics in its folder
 * (`<part>/metrics.ts`, with metric-helpers.ts), typed with its own word lists; the gateway
 * makes them all on this registry (src/gateway-metrics.ts).
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { version } from '../core/version';

/**
 * prom-client's default metrics include three gauges named `*_total`
 * (nodejs_active_{handles,requests,resources}_total), which `promtool check metrics`
 * rejects: only counters may end in _total. Their per-type siblings without the suffix
 * carry the same information (sum them), so these are dropped.
 */
const lintFailingDefaults = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

export class Metrics {
  readonly registry = new Registry();

  readonly draining = new Gauge({ name: 'longrun_draining', help: '1 while the process drains after SIGTERM.', registers: [this.registry] });
  readonly drainDeadline = new Gauge({
    name: 'longrun_drain_deadline_timestamp_seconds',
    help: 'Unix time at which the drain budget (shutdown delay + drain timeout) runs out; 0 while serving.',
    registers: [this.registry],
  });
  readonly traceExportFailures = new Counter({
    name: 'longrun_trace_export_failures_total',
    help: 'Batches of spans the OTLP exporter gave up on (the collector refused, failed or did not answer in time); their spans are lost, no run is affected.',
    registers: [this.registry],
  });
  readonly buildInfo = new Gauge({ name: 'longrun_build_info', help: 'Always 1; the version label says which longrun runs.', labelNames: ['version'], registers: [this.registry] });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics ?? true) {
      collectDefaultMetrics({ register: this.registry });
      for (const name of lintFailingDefaults) this.registry.removeSingleMetric(name);
    }
    this.draining.set(0);
    this.drainDeadline.set(0);
    this.buildInfo.set({ version }, 1);
  }
}
