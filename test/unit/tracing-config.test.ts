/**
 * The OTEL_* variables longrun reads (docs/spec.md §13, docs/configuration.md): when tracing
 * is on at all, where spans go, how, and with which sampler; what an invalid value says
 * (the variable named, a header value never shown).
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config';
import { ConfigError } from '../../src/core/env';
import { parseTracingConfig } from '../../src/observability/tracing-config';

const invalid = (variable: string, expected: string, received: string | undefined, problem?: string): never => {
  throw new ConfigError(variable, expected, received, problem);
};
const parse = (env: Record<string, string>) => parseTracingConfig(env, invalid);

describe('when tracing is on', () => {
  it('is off with no endpoint, with OTEL_SDK_DISABLED=true and with OTEL_TRACES_EXPORTER=none', () => {
    expect(parse({})).toEqual({ enabled: false });
    expect(parse({ OTEL_EXPORTER_OTLP_ENDPOINT: '' })).toEqual({ enabled: false });
    expect(parse({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })).toEqual({ enabled: false });
    expect(parse({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })).toEqual({ enabled: false });
    expect(loadConfig({}).observability.tracing).toEqual({ enabled: false });
  });

  it('is on with an endpoint, with the specification’s defaults', () => {
    expect(parse({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual({
      enabled: true,
      url: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      exportTimeoutMs: 10_000,
      serviceName: 'longrun',
      resourceAttributes: {},
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    });
  });
});

describe('the endpoint', () => {
  it('appends v1/traces to the general endpoint (under its path) and takes the traces endpoint as it is', () => {
    expect(parse({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otlp.example.com/tenant/' })).toMatchObject({ url: 'https://otlp.example.com/tenant/v1/traces' });
    expect(parse({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:4318/custom/spans' })).toMatchObject({
      url: 'http://b:4318/custom/spans',
    });
  });

  it('refuses what is not an http(s) URL, naming the variable', () => {
    expect(() => parse({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    expect(() => parse({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://collector:4317' })).toThrow(/invalid OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: unsupported scheme/);
  });
});

describe('the protocol, headers and timeout', () => {
  const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };

  it('takes http/json, the traces variable over the general one, and refuses grpc with what to do instead', () => {
    expect(parse({ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toMatchObject({ protocol: 'http/json' });
    expect(parse({ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })).toMatchObject({ protocol: 'http/protobuf' });
    expect(() => parse({ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL: OTLP over gRPC is not offered.*4318/);
  });

  it('decodes key=value headers, and never shows a value it cannot read', () => {
    expect(parse({ ...on, OTEL_EXPORTER_OTLP_HEADERS: 'api-key=s3cr%3Dt , x-scope-orgid=tenant-1' })).toMatchObject({
      headers: { 'api-key': 's3cr=t', 'x-scope-orgid': 'tenant-1' },
    });
    let message = '';
    try {
      parse({ ...on, OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20ok,dangling-secret-value' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/OTEL_EXPORTER_OTLP_HEADERS: entry 2 is not key=value/);
    expect(message).not.toContain('dangling-secret-value');
    expect(message).not.toContain('Bearer');
  });

  it('reads the export timeout and the resource attributes', () => {
    expect(parse({ ...on, OTEL_EXPORTER_OTLP_TIMEOUT: '2500', OTEL_SERVICE_NAME: 'longrun-eu', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod' })).toMatchObject({
      exportTimeoutMs: 2_500,
      serviceName: 'longrun-eu',
      resourceAttributes: { 'deployment.environment': 'prod' },
    });
    expect(() => parse({ ...on, OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '0' })).toThrow(/OTEL_EXPORTER_OTLP_TRACES_TIMEOUT/);
  });
});

describe('the sampler', () => {
  const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };

  it('takes the specification’s samplers and a ratio for the *traceidratio ones', () => {
    expect(parse({ ...on, OTEL_TRACES_SAMPLER: 'always_on' })).toMatchObject({ sampler: 'always_on', samplerRatio: 1 });
    expect(parse({ ...on, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' })).toMatchObject({
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.25,
    });
    expect(() => parse({ ...on, OTEL_TRACES_SAMPLER: 'jaeger_remote' })).toThrow(/OTEL_TRACES_SAMPLER/);
    expect(() => parse({ ...on, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
  });
});
