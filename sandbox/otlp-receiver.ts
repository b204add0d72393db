/**
 * A simulated trace collector: an OTLP/HTTP receiver on loopback (Debian packages no
 * OpenTelemetry Collector), for the tests (test/process/tracing-export.test.ts) and the
 * `tracing` benchmark:
 * `POST /v1/traces` with an ExportTraceServiceRequest as protobuf
 * (`application/x-protobuf`) or JSON (`application/json`), decoded into SpanRecords
 * (spans.ts) and answered with an empty ExportTraceServiceResponse in the same encoding —
 * as strict as a collector about the rest: another path is 404, another content type
 * 415, a body that does not decode 400. `hang` accepts requests and never answers (a
 * collector that stopped responding). Received spans are kept (`keep: false`: only counted).
 *
 * The protobuf schema below is the subset of opentelemetry-proto's
 * collector/trace/v1/trace_service.proto, trace/v1/trace.proto, common/v1/common.proto and
 * resource/v1/resource.proto that a trace export uses, written out with the same field
 * numbers and types.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import protobuf from 'protobufjs';

/** One span as received, in the shape tests compare (test/helpers/spans.ts makes the same from the SDK's in-memory spans). */
export interface SpanRecord {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  kind: 'INTERNAL' | 'SERVER' | 'CLIENT' | 'PRODUCER' | 'CONSUMER' | 'UNSPECIFIED';
  /** Nanoseconds since the epoch (ordering only). */
  start: bigint;
  end: bigint;
  attributes: Record<string, unknown>;
  events: Array<{ name: string; attributes: Record<string, unknown> }>;
  links: Array<{ traceId: string; spanId: string; attributes: Record<string, unknown> }>;
  /** 0 unset, 1 ok, 2 error. */
  status: number;
  resource: Record<string, unknown>;
}

const repeated = (type: string, id: number) => ({ rule: 'repeated', type, id });
const field = (type: string, id: number) => ({ type, id });

const root = protobuf.Root.fromJSON({
  nested: {
    otlp: {
      nested: {
        ExportTraceServiceRequest: { fields: { resourceSpans: repeated('ResourceSpans', 1) } },
        ResourceSpans: { fields: { resource: field('Resource', 1), scopeSpans: repeated('ScopeSpans', 2), schemaUrl: field('string', 3) } },
        Resource: { fields: { attributes: repeated('KeyValue', 1), droppedAttributesCount: field('uint32', 2) } },
        ScopeSpans: { fields: { scope: field('InstrumentationScope', 1), spans: repeated('Span', 2), schemaUrl: field('string', 3) } },
        InstrumentationScope: {
          fields: { name: field('string', 1), version: field('string', 2), attributes: repeated('KeyValue', 3), droppedAttributesCount: field('uint32', 4) },
        },
        Span: {
          fields: {
            traceId: field('bytes', 1),
            spanId: field('bytes', 2),
            traceState: field('string', 3),
            parentSpanId: field('bytes', 4),
            flags: field('fixed32', 16),
            name: field('string', 5),
            kind: field('int32', 6),
            startTimeUnixNano: field('fixed64', 7),
            endTimeUnixNano: field('fixed64', 8),
            attributes: repeated('KeyValue', 9),
            droppedAttributesCount: field('uint32', 10),
            events: repeated('Event', 11),
            droppedEventsCount: field('uint32', 12),
            links: repeated('Link', 13),
            droppedLinksCount: field('uint32', 14),
            status: field('Status', 15),
          },
        },
        Event: { fields: { timeUnixNano: field('fixed64', 1), name: field('string', 2), attributes: repeated('KeyValue', 3), droppedAttributesCount: field('uint32', 4) } },
        Link: {
          fields: {
            traceId: field('bytes', 1),
            spanId: field('bytes', 2),
            traceState: field('string', 3),
            attributes: repeated('KeyValue', 4),
            droppedAttributesCount: field('uint32', 5),
            flags: field('fixed32', 6),
          },
        },
        Status: { fields: { message: field('string', 2), code: field('int32', 3) } },
        KeyValue: { fields: { key: field('string', 1), value: field('AnyValue', 2) } },
        AnyValue: {
          oneofs: { value: { oneof: ['stringValue', 'boolValue', 'intValue', 'doubleValue', 'arrayValue', 'kvlistValue', 'bytesValue'] } },
          fields: {
            stringValue: field('string', 1),
            boolValue: field('bool', 2),
            intValue: field('int64', 3),
            doubleValue: field('double', 4),
            arrayValue: field('ArrayValue', 5),
            kvlistValue: field('KeyValueList', 6),
            bytesValue: field('bytes', 7),
          },
        },
        ArrayValue: { fields: { values: repeated('AnyValue', 1) } },
        KeyValueList: { fields: { values: repeated('KeyValue', 1) } },
      },
    },
  },
});
const ExportRequest = root.lookupType('otlp.ExportTraceServiceRequest');

/** The request as protobufjs's toObject gives it (bytes as hex, 64-bit numbers as strings) or as OTLP/JSON writes it. */
interface WireValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: WireValue[] };
  kvlistValue?: { values?: WireKeyValue[] };
  bytesValue?: string;
}
interface WireKeyValue {
  key: string;
  value?: WireValue;
}
interface WireSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  startTimeUnixNano?: string | number;
  endTimeUnixNano?: string | number;
  attributes?: WireKeyValue[];
  events?: Array<{ name: string; attributes?: WireKeyValue[] }>;
  links?: Array<{ traceId: string; spanId: string; attributes?: WireKeyValue[] }>;
  status?: { code?: number };
}
interface WireRequest {
  resourceSpans?: Array<{ resource?: { attributes?: WireKeyValue[] }; scopeSpans?: Array<{ spans?: WireSpan[] }> }>;
}

function valueOf(value: WireValue | undefined): unknown {
  if (!value) return undefined;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(valueOf);
  if (value.kvlistValue !== undefined) return attributesOf(value.kvlistValue.values);
  return value.bytesValue;
}

function attributesOf(list: WireKeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, valueOf(kv.value)]));
}

const kinds: SpanRecord['kind'][] = ['UNSPECIFIED', 'INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'];

function records(request: WireRequest): SpanRecord[] {
  const out: SpanRecord[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const resource = attributesOf(resourceSpans.resource?.attributes);
    for (const scope of resourceSpans.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        out.push({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId ? span.parentSpanId : undefined,
          name: span.name,
          kind: kinds[span.kind ?? 0] ?? 'UNSPECIFIED',
          start: BigInt(span.startTimeUnixNano ?? 0),
          end: BigInt(span.endTimeUnixNano ?? 0),
          attributes: attributesOf(span.attributes),
          events: (span.events ?? []).map((e) => ({ name: e.name, attributes: attributesOf(e.attributes) })),
          links: (span.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId, attributes: attributesOf(l.attributes) })),
          status: span.status?.code ?? 0,
          resource,
        });
      }
    }
  }
  return out;
}

/** Bytes fields (ids) as hex, as OTLP/JSON writes them, so both encodings compare alike. */
function hexIds(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(hexIds);
  if (value instanceof Uint8Array) return Buffer.from(value).toString('hex');
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, hexIds(v)]));
  return value;
}

export function decodeProtobuf(body: Buffer): SpanRecord[] {
  const message = ExportRequest.decode(body);
  return records(hexIds(ExportRequest.toObject(message, { longs: String, defaults: false })) as WireRequest);
}

export function decodeJson(body: Buffer): SpanRecord[] {
  return records(JSON.parse(body.toString('utf8')) as WireRequest);
}

export interface ReceivedExport {
  contentType: string;
  headers: http.IncomingHttpHeaders;
  spans: number;
}

export interface OtlpReceiverOptions {
  /** Read each request and never answer it. */
  hang?: boolean;
  /** Keep the spans received (default true); false: count them only. */
  keep?: boolean;
}

export class OtlpReceiver {
  readonly spans: SpanRecord[] = [];
  readonly exports: ReceivedExport[] = [];
  /** Spans received, kept or not. */
  received = 0;
  /** Requests taken and never answered (`hang`). */
  held = 0;

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
    private readonly keep: boolean,
  ) {}

  /** Listens on a free loopback port. */
  static async start(options: OtlpReceiverOptions = {}): Promise<OtlpReceiver> {
    let receiver: OtlpReceiver | undefined;
    const server = http.createServer((req, res) => receiver?.handle(req, res, options.hang ?? false));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    receiver = new OtlpReceiver(server, `http://127.0.0.1:${port}`, options.keep ?? true);
    return receiver;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse, hang: boolean): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (hang) {
        this.held += 1;
        return;
      }
      const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      if (contentType !== 'application/x-protobuf' && contentType !== 'application/json') {
        res.writeHead(415).end();
        return;
      }
      let spans: SpanRecord[];
      try {
        spans = contentType === 'application/json' ? decodeJson(Buffer.concat(chunks)) : decodeProtobuf(Buffer.concat(chunks));
      } catch {
        res.writeHead(400).end();
        return;
      }
      this.received += spans.length;
      if (this.keep) {
        this.spans.push(...spans);
        this.exports.push({ contentType, headers: req.headers, spans: spans.length });
      }
      // An empty ExportTraceServiceResponse: no bytes in protobuf, {} in JSON.
      if (contentType === 'application/json') res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
