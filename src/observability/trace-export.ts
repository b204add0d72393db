/**
 * Where finished spans go (docs/spec.md §13): the OpenTelemetry SDK's tracer provider with
 * one BatchSpanProcessor in front of an OTLP/HTTP exporter (protobuf or JSON). Ending a
 * span only puts it on the processor's queue; the queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE,
 * 2 048: past it spans are dropped, never held), and exports run one batch at a time on
 * the processor's own timer. So a collector that is down or never answers costs what this
 * file counts — `longrun_trace_export_failures_total`, one per batch given up on — and
 * never a run, memory, or a delayed drain (`flush` is bounded by its caller's budget).
 *
 * Built only when tracing is on: with tracing off no SDK object exists (tracing.ts).
 */
import http from 'node:http';
import https from 'node:https';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { userAgent, version } from '../core/version';
import { maskUrl, type Logger } from '../core/log';
import type { Metrics } from './metrics';
import { Tracing, type TracePipeline } from './tracing';
import type { SamplerName, TracingConfig } from './tracing-config';

/** What the pipeline reports: each batch the exporter gave up on (counted), and when exports work again. */
interface ExportHooks {
  failed(error: Error | undefined): void;
  succeeded(): void;
}

function sampler(name: SamplerName, ratio: number): Sampler {
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

/** The exporter, wrapped so that every batch it gives up on is told to `hooks`. */
class CountingExporter implements SpanExporter {
  constructor(
    private readonly inner: SpanExporter,
    private readonly hooks: ExportHooks,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) this.hooks.succeeded();
      else this.hooks.failed(result.error);
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/** Resolves when `work` settles or after `ms`, whichever is first; never rejects, leaves no timer. */
async function bounded(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms))));
  await Promise.race([work.catch(() => undefined), late]);
  clearTimeout(timer);
}

/**
 * Builds the pipeline for `config` (tracing on). `instanceId` is service.instance.id (the
 * replica id). `exporter` replaces the OTLP exporter (tests: the SDK's in-memory one).
 */
function createTracePipeline(config: Extract<TracingConfig, { enabled: true }>, instanceId: string, hooks: ExportHooks, exporter?: SpanExporter): TracePipeline {
  // The exporter's connections are this agent's, so closing ends them (the OTLP exporters'
  // own shutdown leaves their agent's sockets and any request in flight to their timeouts).
  const agent = config.url.startsWith('https:') ? new https.Agent({ keepAlive: true, maxSockets: 2 }) : new http.Agent({ keepAlive: true, maxSockets: 2 });
  const options = { url: config.url, headers: { ...config.headers }, timeoutMillis: config.exportTimeoutMs, userAgent, httpAgentOptions: () => agent };
  const otlp = exporter ?? (config.protocol === 'http/json' ? new JsonExporter(options) : new ProtobufExporter(options));
  const processor = new BatchSpanProcessor(new CountingExporter(otlp, hooks));
  const provider = new BasicTracerProvider({
    sampler: sampler(config.sampler, config.samplerRatio),
    resource: defaultResource().merge(
      resourceFromAttributes({ ...config.resourceAttributes, 'service.name': config.serviceName, 'service.version': version, 'service.instance.id': instanceId }),
    ),
    spanProcessors: [processor],
  });
  let closing: Promise<void> | undefined;
  return {
    tracer: provider.getTracer('longrun', version),
    flush: (withinMs) => bounded(provider.forceFlush(), withinMs),
    close(withinMs) {
      closing ??= bounded(provider.shutdown(), withinMs).then(() => agent.destroy());
      return closing;
    },
  };
}

/**
 * The process's tracing: off (Tracing.OFF, no SDK object) unless `config` names a
 * collector. A failed export is counted; the first of an outage is logged, and so is the
 * export that works again.
 */
export function startTracing(config: TracingConfig, deps: { metrics: Metrics; logger: Logger; instanceId: string }): Tracing {
  if (!config.enabled) return Tracing.OFF;
  let failing = false;
  const pipeline = createTracePipeline(config, deps.instanceId, {
    failed(error) {
      deps.metrics.traceExportFailures.inc();
      if (failing) return;
      failing = true;
      deps.logger.warn({ collector: maskUrl(config.url), err: error?.message }, 'trace export failed: spans are dropped until the collector answers');
    },
    succeeded() {
      if (!failing) return;
      failing = false;
      deps.logger.info({ collector: maskUrl(config.url) }, 'trace export works again');
    },
  });
  deps.logger.info(
    { collector: maskUrl(config.url), protocol: config.protocol, sampler: config.sampler, service_name: config.serviceName },
    'tracing on: spans are exported over OTLP/HTTP',
  );
  return new Tracing(pipeline.tracer, pipeline);
}
