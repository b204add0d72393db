/**
 * The tracing settings (docs/spec.md §13), read from the standard OpenTelemetry variables
 * only — no LONGRUN_* variable configures tracing — once, into one typed value:
 *
 *   OTEL_SDK_DISABLED=true                  off, whatever else is set
 *   OTEL_TRACES_EXPORTER                    otlp (default) or none (off)
 *   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT      the traces URL, used as it is
 *   OTEL_EXPORTER_OTLP_ENDPOINT             the collector's base URL: /v1/traces is appended
 *   OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL    http/protobuf (default) or http/json
 *   OTEL_EXPORTER_OTLP[_TRACES]_HEADERS     key=value,… (values URL-encoded), sent with every export
 *   OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT     ms one export may take (default 10 000)
 *   OTEL_SERVICE_NAME                       service.name (default longrun)
 *   OTEL_RESOURCE_ATTRIBUTES                key=value,… added to the resource
 *   OTEL_TRACES_SAMPLER / _ARG              default parentbased_always_on
 *
 * No endpoint, OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none: tracing is off — no SDK
 * object is made at all. The batch processor's own variables (OTEL_BSP_*) and the span
 * limits (OTEL_SPAN_*_LIMIT) are read by the SDK itself.
 */

/** How the OTLP exporter encodes spans (gRPC is not offered: the OTLP/HTTP exporters need no native code). */
export const otlpProtocols = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof otlpProtocols)[number];

/** The samplers of the OpenTelemetry specification that need nothing but a ratio. */
export const samplerNames = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;
export type SamplerName = (typeof samplerNames)[number];

export type TracingConfig =
  | { readonly enabled: false }
  | {
      readonly enabled: true;
      /** Where spans are POSTed: the full traces URL. */
      readonly url: string;
      readonly protocol: OtlpProtocol;
      /** Sent with every export (an API key, a tenant): never logged. */
      readonly headers: Readonly<Record<string, string>>;
      readonly exportTimeoutMs: number;
      readonly serviceName: string;
      readonly resourceAttributes: Readonly<Record<string, string>>;
      readonly sampler: SamplerName;
      /** The ratio of the *traceidratio samplers, 0 to 1. */
      readonly samplerRatio: number;
    };

const TRACING_OFF: TracingConfig = Object.freeze({ enabled: false });

/** Throws for an invalid variable (config.ts makes it a ConfigError naming the variable). */
export type Invalid = (variable: string, expected: string, received: string | undefined, problem?: string) => never;

type Env = Record<string, string | undefined>;

/** The traces variant of a variable when set, else the general one. */
function either(env: Env, traces: string, general: string): { name: string; value: string } | undefined {
  for (const name of [traces, general]) {
    const value = env[name]?.trim();
    if (value) return { name, value };
  }
  return undefined;
}

/**
 * The traces URL. A signal-specific endpoint is the whole URL; the general one is a base
 * to which `v1/traces` is appended (the OTLP exporter specification).
 */
function tracesUrl(env: Env, invalid: Invalid): string | undefined {
  const given = either(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (!given) return undefined;
  let url: URL;
  try {
    url = new URL(given.value);
  } catch {
    return invalid(given.name, 'an absolute http(s) URL', given.value, 'not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return invalid(given.name, 'an absolute http(s) URL', given.value, `unsupported scheme "${url.protocol}//"`);
  if (given.name === 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') return url.href;
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/traces`;
  return url.href;
}

/**
 * `key=value,key=value` as the W3C Baggage format writes it (OTEL_EXPORTER_OTLP_HEADERS,
 * OTEL_RESOURCE_ATTRIBUTES): values percent-decoded, blanks around entries ignored. A
 * value may hold a credential: an error never shows it.
 */
function keyValues(name: string, text: string, invalid: Invalid): Record<string, string> {
  const out: Record<string, string> = {};
  const entries = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const [i, entry] of entries.entries()) {
    const eq = entry.indexOf('=');
    const key = eq > 0 ? entry.slice(0, eq).trim() : '';
    if (!key) return invalid(name, 'a comma-separated list of key=value', '(not shown: it may hold a credential)', `entry ${i + 1} is not key=value`);
    let value: string;
    try {
      value = decodeURIComponent(entry.slice(eq + 1).trim());
    } catch {
      return invalid(name, 'a comma-separated list of key=value, values percent-encoded', '(not shown: it may hold a credential)', `entry ${i + 1} is not percent-encoded`);
    }
    out[key] = value;
  }
  return out;
}

function flag(env: Env, name: string, invalid: Invalid): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (!raw || raw === 'false') return false;
  if (raw === 'true') return true;
  return invalid(name, 'true or false', env[name]);
}

function sampler(env: Env, invalid: Invalid): { sampler: SamplerName; samplerRatio: number } {
  const raw = env['OTEL_TRACES_SAMPLER']?.trim().toLowerCase() || 'parentbased_always_on';
  if (!(samplerNames as readonly string[]).includes(raw)) return invalid('OTEL_TRACES_SAMPLER', samplerNames.join(', '), env['OTEL_TRACES_SAMPLER']);
  const argument = env['OTEL_TRACES_SAMPLER_ARG']?.trim();
  let samplerRatio = 1;
  if (raw.endsWith('traceidratio') && argument) {
    samplerRatio = Number(argument);
    if (!Number.isFinite(samplerRatio) || samplerRatio < 0 || samplerRatio > 1) return invalid('OTEL_TRACES_SAMPLER_ARG', 'a ratio from 0 to 1', argument);
  }
  return { sampler: raw as SamplerName, samplerRatio };
}

/** The tracing settings of `env`; throws through `invalid` on the first invalid variable. */
export function parseTracingConfig(env: Env, invalid: Invalid): TracingConfig {
  if (flag(env, 'OTEL_SDK_DISABLED', invalid)) return TRACING_OFF;
  const exporter = env['OTEL_TRACES_EXPORTER']?.trim().toLowerCase() || 'otlp';
  if (exporter === 'none') return TRACING_OFF;
  if (exporter !== 'otlp') return invalid('OTEL_TRACES_EXPORTER', 'otlp or none', env['OTEL_TRACES_EXPORTER']);
  const url = tracesUrl(env, invalid);
  if (url === undefined) return TRACING_OFF;
  const protocol = either(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL');
  if (protocol && !(otlpProtocols as readonly string[]).includes(protocol.value)) {
    return invalid(
      protocol.name,
      otlpProtocols.join(' or '),
      protocol.value,
      protocol.value === 'grpc' ? 'OTLP over gRPC is not offered: point longrun at the collector’s HTTP port (4318)' : undefined,
    );
  }
  const headers = either(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS', 'OTEL_EXPORTER_OTLP_HEADERS');
  const timeout = either(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', 'OTEL_EXPORTER_OTLP_TIMEOUT');
  const exportTimeoutMs = timeout ? Number(timeout.value) : 10_000;
  if (!Number.isInteger(exportTimeoutMs) || exportTimeoutMs < 1 || exportTimeoutMs > 2 ** 31 - 1)
    return invalid(timeout?.name ?? '', 'a positive integer number of milliseconds', timeout?.value);
  const attributes = env['OTEL_RESOURCE_ATTRIBUTES']?.trim();
  return {
    enabled: true,
    url,
    protocol: (protocol?.value as OtlpProtocol | undefined) ?? 'http/protobuf',
    headers: headers ? keyValues(headers.name, headers.value, invalid) : {},
    exportTimeoutMs,
    serviceName: env['OTEL_SERVICE_NAME']?.trim() || 'longrun',
    resourceAttributes: attributes ? keyValues('OTEL_RESOURCE_ATTRIBUTES', attributes, invalid) : {},
    ...sampler(env, invalid),
  };
}
