/** The HTTP section of the configuration (docs/configuration.md "Listeners"): where the main and ops listeners bind, and the blocking stream's keepalive. */
import { ConfigError, readMs, type Env } from '../core/env';

export interface ListenAddress {
  host: string;
  port: number;
}

export interface HttpSettings {
  listen: ListenAddress;
  opsListen: ListenAddress;
  /** Blocking: an empty ndjson line this often. */
  keepaliveMs: number;
}

function readListen(env: Env, name: string, fallback: string): ListenAddress {
  const raw = env[name] === undefined || env[name] === '' ? fallback : (env[name] as string);
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(raw.trim());
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65_535) throw new ConfigError(name, 'host:port (port 0-65535)', env[name]);
  return { host: (match[1] ?? match[2]) as string, port };
}

export function readHttpSettings(env: Env): HttpSettings {
  return {
    listen: readListen(env, 'LONGRUN_LISTEN', '127.0.0.1:8181'),
    opsListen: readListen(env, 'LONGRUN_OPS_LISTEN', '127.0.0.1:9181'),
    keepaliveMs: readMs(env, 'LONGRUN_KEEPALIVE_MS', 20_000),
  };
}
