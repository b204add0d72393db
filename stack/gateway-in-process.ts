/**
 * A stack's gateway in this process: the real Gateway, configured from LONGRUN_* variables
 * as main.ts does it (loadConfig, gatewayConfig, Gateway.start), its log captured as raw
 * bytes for a test to search.
 */
import { Writable } from 'node:stream';
import { gatewayConfig, loadConfig } from '../src/config';
import { createLogger } from '../src/core/log';
import { Gateway } from '../src/gateway';
import type { Tracing } from '../src/observability/tracing';
import { metricsText } from './gateway-requests';

export interface GatewayInProcess {
  /** Its LONGRUN_REPLICA_ID when the stack named it; undefined: the configuration's default. */
  readonly name: string | undefined;
  readonly gateway: Gateway;
  readonly url: string;
  readonly opsUrl: string;
  /** Everything it logged so far (ndjson). */
  logs(): string;
  metrics(): Promise<string>;
  /** Gateway.close(); idempotent. */
  close(): Promise<void>;
}

/** Starts a Gateway on `env` alone (not this process's environment); its spans go to `tracing` when given. */
export async function startGatewayInProcess(name: string | undefined, env: Record<string, string>, tracing?: Tracing): Promise<GatewayInProcess> {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(Buffer.from(chunk));
      cb();
    },
  });
  const config = gatewayConfig(loadConfig(env));
  const gateway = await Gateway.start(config, { logger: createLogger(config.logLevel, sink), ...(tracing ? { tracing } : {}) });
  let closing: Promise<void> | undefined;
  return {
    name,
    gateway,
    url: gateway.mainUrl,
    opsUrl: gateway.opsUrl,
    logs: () => Buffer.concat(chunks).toString('utf8'),
    metrics: () => metricsText(gateway.opsUrl),
    close: () => (closing ??= gateway.close().then(() => undefined)),
  };
}
