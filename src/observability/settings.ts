/** The observability section of the configuration: tracing (docs/spec.md §13), from the standard OTEL_* variables only (tracing-config.ts). */
import { ConfigError, type Env } from '../core/env';
import { parseTracingConfig, type TracingConfig } from './tracing-config';

export interface ObservabilitySettings {
  /** Off without a collector endpoint. */
  tracing: TracingConfig;
}

export function readObservabilitySettings(env: Env): ObservabilitySettings {
  return {
    tracing: parseTracingConfig(env, (variable, expected, received, problem) => {
      throw new ConfigError(variable, expected, received, problem);
    }),
  };
}
