/**
 * Spans for assertions, from wherever they were caught: the SDK's in-memory exporter
 * (SpanCapture, for a gateway in the test's process) or an OTLP receiver on loopback
 * (sandbox/otlp-receiver.ts, for the built gateway). Both give SpanRecords, which `tree`
 * draws as the indented text a test compares whole, and `leaks` searches for what no span may carry.
 */
import { ROOT_CONTEXT, SpanKind, trace, type Span } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Tracing } from '../../src/observability/tracing';
import type { SpanRecord } from '../../sandbox/otlp-receiver';

export type { SpanRecord };

const kinds = ['INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'] as const;

function nanos([seconds, ns]: [number, number]): bigint {
  return BigInt(seconds) * 1_000_000_000n + BigInt(ns);
}

export function fromReadable(span: ReadableSpan): SpanRecord {
  const context = span.spanContext();
  return {
    traceId: context.traceId,
    spanId: context.spanId,
    parentSpanId: span.parentSpanContext?.spanId,
    name: span.name,
    kind: kinds[span.kind] ?? 'UNSPECIFIED',
    start: nanos(span.startTime),
    end: nanos(span.endTime),
    attributes: { ...span.attributes },
    events: span.events.map((e) => ({ name: e.name, attributes: { ...e.attributes } })),
    links: span.links.map((l) => ({ traceId: l.context.traceId, spanId: l.context.spanId, attributes: { ...l.attributes } })),
    status: span.status.code,
    resource: { ...span.resource.attributes },
  };
}

/** A tracer on the SDK's in-memory exporter, handed to a gateway in place of its OTLP pipeline. */
export class SpanCapture {
  private readonly exporter = new InMemorySpanExporter();
  private readonly provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(this.exporter)] });
  readonly tracing = new Tracing(this.provider.getTracer('longrun'));
  /** The dispatcher's side: a tracer of its own on the same exporter. */
  private readonly caller = this.provider.getTracer('dispatcher');

  spans(): SpanRecord[] {
    return this.exporter.getFinishedSpans().map(fromReadable);
  }

  reset(): void {
    this.exporter.reset();
  }

  /** A span of the caller's, and the traceparent it would send with its request (end the span when the request is done). */
  callerSpan(name: string): { span: Span; traceparent: string } {
    const span = this.caller.startSpan(name, { kind: SpanKind.CLIENT });
    const carrier: Record<string, string> = {};
    new W3CTraceContextPropagator().inject(trace.setSpan(ROOT_CONTEXT, span), carrier, { set: (c, k, v) => (c[k] = v) });
    return { span, traceparent: carrier['traceparent'] as string };
  }
}

/** The span named `name` (the only one, or the `nth`); throws naming the spans there are. */
export function spanNamed(spans: SpanRecord[], name: string, nth = 1): SpanRecord {
  const found = spans.filter((s) => s.name === name)[nth - 1];
  if (!found) throw new Error(`no span ${JSON.stringify(name)} #${nth} among ${JSON.stringify(spans.map((s) => s.name))}`);
  return found;
}

/**
 * The tree under `root` as indented lines — `name [KIND]`, children in start order —
 * with each span's attributes `keys` appended where set (`name [KIND] key=value`).
 */
export function tree(spans: SpanRecord[], root: SpanRecord, keys: readonly string[] = []): string {
  const children = new Map<string, SpanRecord[]>();
  for (const span of spans) {
    if (span.parentSpanId === undefined || span.traceId !== root.traceId) continue;
    const list = children.get(span.parentSpanId) ?? [];
    list.push(span);
    children.set(span.parentSpanId, list);
  }
  const lines: string[] = [];
  const draw = (span: SpanRecord, depth: number): void => {
    const shown = keys.filter((k) => span.attributes[k] !== undefined).map((k) => ` ${k}=${String(span.attributes[k])}`);
    lines.push(`${'  '.repeat(depth)}${span.name} [${span.kind}]${shown.join('')}`);
    for (const child of (children.get(span.spanId) ?? []).sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0))) draw(child, depth + 1);
  };
  draw(root, 0);
  return lines.join('\n');
}

/**
 * The span tree of a detached execute whose turn relays twice around one MCP tool call and
 * ends (`tree`'s lines), under the dispatcher's span `root`: the request's preauth, lock and
 * stream open, and the run's own span beside it, linked, with its calls and the callback.
 */
export function detachedExecuteTree(root: string): string {
  return [
    `${root} [CLIENT]`,
    '  POST /api/v4/ai/duo_workflows/workflows/{workflow_id}/execute [SERVER]',
    '    owner preauth [CLIENT]',
    '    lock acquire [INTERNAL]',
    '    workflow stream open [CLIENT]',
    '  workflow run [INTERNAL]',
    '    owner relay [CLIENT]',
    '    mcp tool call [CLIENT]',
    '    owner relay [CLIENT]',
    '    owner segment_end [CLIENT]',
  ].join('\n');
}

/**
 * Every place in `spans` — names, attribute keys and values, event and link attributes,
 * the resource — that holds one of `secrets` (a token, a goal, a payload), as `span: where`.
 */
export function leaks(spans: SpanRecord[], secrets: readonly string[]): string[] {
  const found: string[] = [];
  const check = (span: SpanRecord, where: string, text: string): void => {
    for (const secret of secrets) if (text.includes(secret)) found.push(`${span.name}: ${where} holds ${JSON.stringify(secret)}`);
  };
  const checkAll = (span: SpanRecord, where: string, attributes: Record<string, unknown>): void => {
    for (const [key, value] of Object.entries(attributes)) check(span, `${where} ${key}`, `${key}=${JSON.stringify(value)}`);
  };
  for (const span of spans) {
    check(span, 'name', span.name);
    checkAll(span, 'attribute', span.attributes);
    checkAll(span, 'resource', span.resource);
    for (const event of span.events) {
      check(span, 'event', event.name);
      checkAll(span, `event ${event.name}`, event.attributes);
    }
    for (const link of span.links) checkAll(span, 'link', link.attributes);
  }
  return found;
}
