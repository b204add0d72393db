/**
 * The owner section of the configuration (docs/configuration.md "Owner service"): where the
 * owner and the relay target are, the secret shared with the owner, and the deadlines, pool and
 * retries of every call to it. Only the environment may leave the URL and the secret to the
 * sandbox (OwnerEnvSettings), which fills them in before a gateway starts (ownerSettingsOf).
 */
import { readFileSync } from 'node:fs';
import { ConfigError, durationMs, read, readInt, readMs, type Env } from '../core/env';

export interface OwnerSettings {
  url: URL;
  /**
   * Where relayed runHTTPRequests go (LONGRUN_RELAY_URL; the owner URL when unset): beside
   * GitLab, Workhorse's own listener, so relays pass its router as Workhorse's own relays
   * do. Its path is the relative URL root, prepended as Workhorse prepends it.
   */
  relayUrl: URL;
  /** The 32-byte HS256 secret shared with the owner. */
  secret: Buffer;
  preauthTimeoutMs: number;
  relayTimeoutMs: number;
  /** Connections in the pool to the owner service (preauth, relay, callbacks). */
  connections: number;
  /** Tries of one segment-end callback, and the deadline of each. */
  callbackAttempts: number;
  callbackTimeoutMs: number;
  /** Segment-end callbacks in flight at once; the others wait their turn (bounded by the drain budget). */
  callbackConcurrency: number;
  /** How long a signed Gitlab-Workhorse-Api-Request JWT is reused (at most JWT_REFRESH_MAX_MS). */
  jwtRefreshMs: number;
}

/** The owner section as the environment gives it: the URL, relay URL and secret may be left to the sandbox. */
export type OwnerEnvSettings = Omit<OwnerSettings, 'url' | 'relayUrl' | 'secret'> & {
  /** Unset only in the sandbox. */
  url: URL | undefined;
  /** LONGRUN_RELAY_URL; unset: the owner URL (ownerSettingsOf fills it in). Never set with the sandbox. */
  relayUrl: URL | undefined;
  /** Undefined only in the sandbox (which makes one). */
  secret: Buffer | undefined;
};

/**
 * The longest LONGRUN_JWT_REFRESH_MS. Rails refuses a Gitlab-Workhorse-Api-Request whose iat
 * is more than 90 s old (Gitlab::Workhorse::API_REQUEST_JWT_VALIDITY); a token reused for at
 * most 60 s leaves 30 s for the connection pool's queue, the wire and clock skew.
 */
const JWT_REFRESH_MAX_MS = 60_000;

/** An http(s) URL without credentials (the owner and the relay target are called with the JWT), or undefined when unset. */
function readServiceUrl(env: Env, name: 'LONGRUN_OWNER_URL' | 'LONGRUN_RELAY_URL'): URL | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const expected = 'an absolute http(s) URL';
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new ConfigError(name, expected, raw, 'not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(name, expected, raw, `unsupported scheme "${url.protocol}//"`);
  }
  if (url.username !== '' || url.password !== '') {
    // They would be dropped silently: every call carries longrun's JWT instead.
    throw new ConfigError(name, expected, raw, 'credentials in the URL are not used (calls carry the shared-secret JWT): remove them');
  }
  return url;
}

/** Reads a Workhorse-format secret file: base64 of exactly 32 bytes. */
export function readSecretFile(file: string): Buffer {
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new ConfigError('LONGRUN_SECRET_FILE', `a readable file (${(err as Error).message})`, file);
  }
  const bytes = Buffer.from(text, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || bytes.length !== 32) {
    throw new ConfigError('LONGRUN_SECRET_FILE', 'a file holding base64 of 32 bytes', file);
  }
  return bytes;
}

/** The URL and relay URL of the owner, from the environment (the sandbox's checks are src/config.ts's). */
export function readOwnerUrls(env: Env): Pick<OwnerEnvSettings, 'url' | 'relayUrl'> {
  return { url: readServiceUrl(env, 'LONGRUN_OWNER_URL'), relayUrl: readServiceUrl(env, 'LONGRUN_RELAY_URL') };
}

/** The rest of the owner section, once the URLs are read (readOwnerUrls): the secret, required with an owner URL, and every call's limits. */
export function readOwnerSettings(env: Env, urls: Pick<OwnerEnvSettings, 'url' | 'relayUrl'>): OwnerEnvSettings {
  const secretFile = env['LONGRUN_SECRET_FILE'];
  let secret: Buffer | undefined;
  if (secretFile !== undefined && secretFile !== '') secret = readSecretFile(secretFile);
  else if (urls.url) throw new ConfigError('LONGRUN_SECRET_FILE', 'a path (required when LONGRUN_OWNER_URL is set)', secretFile);
  return {
    ...urls,
    secret,
    preauthTimeoutMs: readMs(env, 'LONGRUN_PREAUTH_TIMEOUT_MS', 10_000),
    relayTimeoutMs: readMs(env, 'LONGRUN_RELAY_TIMEOUT_MS', 5_000),
    // Enough for thousands of concurrent relays and a drain's burst of callbacks.
    connections: readInt(env, 'LONGRUN_OWNER_CONNECTIONS', 1, 65_536, 256),
    // Three tries with 100 ms and 300 ms between them fit a drain's budget.
    callbackAttempts: readInt(env, 'LONGRUN_CALLBACK_ATTEMPTS', 1, 20, 3),
    callbackTimeoutMs: readMs(env, 'LONGRUN_CALLBACK_TIMEOUT_MS', 2_000),
    // Enough to keep an owner busy (a drain's 5 000 callbacks take about a second at 64),
    // few enough that a drain does not open thousands of requests on it at once.
    callbackConcurrency: readInt(env, 'LONGRUN_CALLBACK_CONCURRENCY', 1, 10_000, 64),
    // Signing per request would cost CPU on the hot path; the owner only wants a fresh iat.
    jwtRefreshMs: read(env, 'LONGRUN_JWT_REFRESH_MS', durationMs.max(JWT_REFRESH_MAX_MS), `an integer number of milliseconds from 1 to ${JWT_REFRESH_MAX_MS}`, 30_000),
  };
}

/**
 * The owner section a gateway runs with, from one whose URL and secret are set (by the
 * environment or by the sandbox); the relay URL defaults to the owner URL. Throws
 * ConfigError when they are not.
 */
export function ownerSettingsOf(owner: OwnerEnvSettings): OwnerSettings {
  const { url, secret } = owner;
  if (!url) throw new ConfigError('LONGRUN_OWNER_URL', 'an absolute http(s) URL (or the sandbox)', undefined);
  if (!secret) throw new ConfigError('LONGRUN_SECRET_FILE', 'a path (required when LONGRUN_OWNER_URL is set)', undefined);
  return { ...owner, url, relayUrl: owner.relayUrl ?? url, secret };
}
