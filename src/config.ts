/**
 * Configuration (docs/spec.md §8): every LONGRUN_* variable parsed once into one typed,
 * fully-defaulted Config. An invalid value throws ConfigError naming the variable and
 * what was expected; main() prints it and exits 1.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { z } from 'zod';
import { SERVER_SHUTDOWN, STOP_REASON_TOKEN, publicInfraStopReasons } from './run/stop-reasons';
import { redisKeySchemes, type RedisKeyScheme } from './redis/keys';
import { RedisUrlError, parseRedisUrl, type RedisTarget } from './redis/url';
import { maskUrl } from './core/log';
import { parseTracingConfig, type TracingConfig } from './observability/tracing-config';

export interface ListenAddress {
  host: string;
  port: number;
}

/**
 * What the gateway runs with: every setting fully defaulted, units in the names. The
 * owner URL and secret are required here; only the environment may leave them to the
 * sandbox (EnvConfig), which fills them in before a gateway starts.
 */
export interface Config {
  listen: ListenAddress;
  opsListen: ListenAddress;
  ownerUrl: URL;
  /**
   * Where relayed runHTTPRequests go (LONGRUN_RELAY_URL; the owner URL when unset): beside
   * GitLab, Workhorse's own listener, so relays pass its router as Workhorse's own relays
   * do. Its path is the relative URL root, prepended as Workhorse prepends it.
   */
  relayUrl: URL;
  /** The 32-byte HS256 secret shared with the owner. */
  secret: Buffer;
  /**
   * LONGRUN_REDIS_URL parsed; unset → the in-process lock backend (single replica). With
   * LONGRUN_REDIS_KEYS=cluster it is a Redis Cluster (mode `cluster`, hash-tagged keys).
   */
  redis: RedisTarget | undefined;
  /**
   * LONGRUN_REDIS_KEYS: `workhorse` (Workhorse's key names, one primary) or `cluster`
   * (hash-tagged names, a Redis Cluster reached through the URL's seed nodes).
   */
  redisKeys: RedisKeyScheme;
  /**
   * LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS: longrun may CONFIG SET the server's keyspace
   * notifications (on every primary it connects to). Off by default: a shared Redis is
   * not longrun's to reconfigure.
   */
  redisConfigureNotifications: boolean;
  acceptWaitMs: number;
  /** How long the service may take to open a stream and take the startRequest. */
  streamOpenTimeoutMs: number;
  /** Blocking: a caller that takes no line for this long is treated as gone. */
  callerStallMs: number;
  runLimitMs: number;
  stopAckTimeoutMs: number;
  leaseTtlMs: number;
  stopPollMs: number;
  stopKeyTtlMs: number;
  keepaliveMs: number;
  shutdownDelayMs: number;
  drainTimeoutMs: number;
  /** Of the drain budget, what is kept for lock release and callbacks after the stops. */
  drainReserveMs: number;
  maxDetachedRuns: number;
  maxRunsPerActor: number;
  /** WebSocket sessions (docs/spec.md §11): a ping this often; no pong for wsPongTimeoutMs ends the session. */
  wsPingMs: number;
  wsPongTimeoutMs: number;
  /** A client that takes nothing written to it for this long is gone; a close frame gets wsCloseTimeoutMs. */
  wsWriteTimeoutMs: number;
  wsCloseTimeoutMs: number;
  /** A WebSocket client that sends no startRequest this long after the upgrade is closed 1008. */
  wsStartTimeoutMs: number;
  /** Origins allowed besides the request's own host (scheme://host[:port], lower case). */
  wsAllowedOrigins: readonly string[];
  /** Check a browser's Origin against X-Forwarded-Host (behind a proxy that sets it) instead of Host. */
  trustForwardedHost: boolean;
  /** A WebSocket run whose connection is lost waits this long for its client (0: stopped at once, as Workhorse). */
  wsResumeWindowMs: number;
  /** Bytes of frames a parked WebSocket run keeps for its client; past them it is stopped. */
  wsBacklogBytes: number;
  /** Bytes of frames every parked WebSocket run of the process keeps together; past them a parked run that grows its backlog is stopped. */
  wsBacklogBudgetBytes: number;
  /** WebSocket sessions at once in this process (503 before the upgrade when full). */
  maxWsSessions: number;
  /**
   * Following a run (docs/spec.md §14): after a resumable end, how long a follow stream waits
   * for the workflow's next run before it ends with `idle`.
   */
  followIdleMs: number;
  /** A comment line on every follow stream this often (proxies and browsers keep it open). */
  followKeepaliveMs: number;
  /** Bytes a follower may leave unread; past them it is dropped (it resumes by Last-Event-ID). */
  followBufferBytes: number;
  /** Events of a followed workflow kept for followers that resume (Last-Event-ID, ?after=). */
  followBacklogEvents: number;
  /** Follow streams of one workflow on this replica, and of the whole process (503 past either). */
  maxFollowersPerWorkflow: number;
  maxFollowers: number;
  preauthTimeoutMs: number;
  relayTimeoutMs: number;
  /** Deadline of one MCP tool call. */
  mcpTimeoutMs: number;
  /** Deadline of a run's MCP discovery (connect and list every server), before its start is sent. */
  mcpDiscoveryTimeoutMs: number;
  /** Let external MCP servers be on loopback, link-local and private addresses (tests, on-premise). */
  mcpAllowPrivate: boolean;
  /** Connections in the pool to the owner service (preauth, relay, callbacks). */
  ownerConnections: number;
  /** Tries of one segment-end callback, and the deadline of each. */
  callbackAttempts: number;
  callbackTimeoutMs: number;
  /** Segment-end callbacks in flight at once; the others wait their turn (bounded by the drain budget). */
  callbackConcurrency: number;
  /** How long a signed Gitlab-Workhorse-Api-Request JWT is reused (at most JWT_REFRESH_MAX_MS). */
  jwtRefreshMs: number;
  /** Per-command deadline of Redis commands, and of connecting. */
  redisCommandTimeoutMs: number;
  redisConnectTimeoutMs: number;
  /**
   * LONGRUN_WORKFLOW_INFRA_STOP_REASONS: the stop words the workflow service treats as
   * infrastructure stops (it keeps the workflow `running`); longrun's own stops use the
   * most specific of them (docs/spec.md §4). Always holds WORKHORSE_SERVER_SHUTDOWN.
   */
  workflowInfraStopReasons: readonly string[];
  /** Streams per gRPC connection before another connection to the same target is opened (100: the usual per-connection stream cap of gRPC servers). */
  grpcStreamsPerConnection: number;
  /** gRPC keepalive ping interval; a ping unanswered for grpcKeepaliveTimeoutMs ends every call on its connection (docs/spec.md §4). */
  grpcKeepaliveTimeMs: number;
  grpcKeepaliveTimeoutMs: number;
  /** Ping idle gRPC connections too (the real service permits it; a default gRPC server does not). */
  grpcKeepaliveWithoutCalls: boolean;
  replicaId: string;
  /** Tracing (docs/spec.md §13), from the standard OTEL_* variables only: off without a collector endpoint. */
  tracing: TracingConfig;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

/** The environment read: a Config whose owner URL and secret may be left to the sandbox. */
export type EnvConfig = Omit<Config, 'ownerUrl' | 'relayUrl' | 'secret'> & {
  /**
   * The sandbox (docs/spec.md §9) provides the owner and workflow services: asked for by
   * LONGRUN_SANDBOX=true, or the default with no LONGRUN_OWNER_URL outside production.
   */
  sandbox: boolean;
  /** Unset only in the sandbox. */
  ownerUrl: URL | undefined;
  /** LONGRUN_RELAY_URL; unset: the owner URL (gatewayConfig fills it in). Never set with the sandbox. */
  relayUrl: URL | undefined;
  /** Undefined only in the sandbox (which makes one). */
  secret: Buffer | undefined;
};

/**
 * An invalid variable: names it, says what is wrong, and shows the value with any
 * credential masked (`redis://:***@host`) — start-up output must never print a secret.
 */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    expected: string,
    received: string | undefined,
    problem?: string,
  ) {
    const shown = received === undefined ? 'nothing' : JSON.stringify(maskUrl(received));
    super(`invalid ${variable}: ${problem ? `${problem}; ` : ''}expected ${expected}, got ${shown}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/**
 * The longest LONGRUN_JWT_REFRESH_MS. Rails refuses a Gitlab-Workhorse-Api-Request whose iat
 * is more than 90 s old (Gitlab::Workhorse::API_REQUEST_JWT_VALIDITY); a token reused for at
 * most 60 s leaves 30 s for the connection pool's queue, the wire and clock skew.
 */
const JWT_REFRESH_MAX_MS = 60_000;

const durationMs = z.coerce
  .number()
  .int()
  .min(1)
  .max(2 ** 31 - 1);
const nonNegativeMs = z.coerce
  .number()
  .int()
  .min(0)
  .max(2 ** 31 - 1);
const count = z.coerce.number().int().min(0);
/** LONGRUN_WORKFLOW_INFRA_STOP_REASONS: every workflow service allowlists the shutdown word, and the drain relies on it. */
const stopWordList = z
  .string()
  .transform((text) => [
    ...new Set(
      text
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ])
  .pipe(z.array(z.string().regex(STOP_REASON_TOKEN)).refine((words) => words.includes(SERVER_SHUTDOWN)));

/** Variables renamed, old name → new: what each old one says instead. */
function renamed(names: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(names).map(([from, to]) => [from, `renamed ${to}: set that instead (same meaning, same value)`]));
}

/**
 * Variables that once existed and now say something the configuration says another way:
 * one left set must not be silently ignored (the operator meant something by it).
 */
export const removedVariables: Readonly<Record<string, string>> = {
  LONGRUN_STOP_REASON_RUN_LIMIT:
    'list the stop words your workflow service allowlists in LONGRUN_WORKFLOW_INFRA_STOP_REASONS instead (the run limit sends WORKHORSE_RUN_LIMIT when it is listed, else WORKHORSE_SERVER_SHUTDOWN)',
  LONGRUN_STOP_REASON_LOCK_LOST:
    'list the stop words your workflow service allowlists in LONGRUN_WORKFLOW_INFRA_STOP_REASONS instead (a lost lease sends WORKHORSE_LOCK_LOST when it is listed, else WORKHORSE_SERVER_SHUTDOWN)',
  LONGRUN_STOP_REASON_DRAIN: 'a drain always sends WORKHORSE_SERVER_SHUTDOWN, the one word every workflow service acknowledges as a shutdown',
  // Following a run was called watching (GET …/events, a path Rails serves): one word now, `follow`.
  ...renamed({
    LONGRUN_WATCH_IDLE_MS: 'LONGRUN_FOLLOW_IDLE_MS',
    LONGRUN_WATCH_KEEPALIVE_MS: 'LONGRUN_FOLLOW_KEEPALIVE_MS',
    LONGRUN_WATCH_BUFFER_BYTES: 'LONGRUN_FOLLOW_BUFFER_BYTES',
    LONGRUN_WATCH_BACKLOG_EVENTS: 'LONGRUN_FOLLOW_BACKLOG_EVENTS',
    LONGRUN_MAX_WATCHERS_PER_WORKFLOW: 'LONGRUN_MAX_FOLLOWERS_PER_WORKFLOW',
    LONGRUN_MAX_WATCHERS: 'LONGRUN_MAX_FOLLOWERS',
  }),
};

function read<T>(env: Env, name: string, schema: z.ZodType<T>, expected: string, fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const parsed = schema.safeParse(raw.trim());
  if (!parsed.success) throw new ConfigError(name, expected, raw);
  return parsed.data;
}

/** A duration in milliseconds, at least 1 (every *_MS variable but the few that take 0). */
function readMs(env: Env, name: string, fallback: number): number {
  return read(env, name, durationMs, 'a positive integer number of milliseconds', fallback);
}

/** A duration in milliseconds that may be 0 (`what0`: what 0 means, when it means more than no wait). */
function readMsOrZero(env: Env, name: string, fallback: number, what0?: string): number {
  return read(env, name, nonNegativeMs, `a non-negative integer number of milliseconds${what0 ? ` (0 = ${what0})` : ''}`, fallback);
}

function parseListen(env: Env, name: string, fallback: string): ListenAddress {
  const raw = env[name] === undefined || env[name] === '' ? fallback : (env[name] as string);
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(raw.trim());
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65_535) throw new ConfigError(name, 'host:port (port 0-65535)', env[name]);
  return { host: (match[1] ?? match[2]) as string, port };
}

/** An http(s) URL without credentials (the owner and the relay target are called with the JWT), or undefined when unset. */
function parseServiceUrl(env: Env, name: 'LONGRUN_OWNER_URL' | 'LONGRUN_RELAY_URL'): URL | undefined {
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

/**
 * LONGRUN_RELAY_URL: only beside a real owner. The sandbox's relays go to its simulated
 * owner; sending its made-up token to a real GitLab would only be refused.
 */
function parseRelayUrl(env: Env, ownerUrl: URL | undefined): URL | undefined {
  const url = parseServiceUrl(env, 'LONGRUN_RELAY_URL');
  if (url && !ownerUrl) throw new ConfigError('LONGRUN_RELAY_URL', 'it unset with the sandbox', env['LONGRUN_RELAY_URL'], 'the sandbox relays to its simulated owner');
  return url;
}

/** A switch: true, false, 1 or 0 (any case). */
const flag = z
  .string()
  .transform((v) => v.toLowerCase())
  .pipe(z.enum(['true', 'false', '1', '0']))
  .transform((v) => v === 'true' || v === '1');

/**
 * Whether the sandbox runs (docs/configuration.md "The sandbox"). Without an owner it is
 * the default only outside production: an image (NODE_ENV=production) started without
 * its owner must stop, not serve simulated answers on all interfaces and report Ready.
 * There it runs only when asked for by name, and never beside a real owner.
 */
function parseSandbox(env: Env, ownerUrl: URL | undefined): boolean {
  const asked = read<boolean | undefined>(env, 'LONGRUN_SANDBOX', flag, 'true or false', undefined);
  if (ownerUrl) {
    if (asked === true)
      throw new ConfigError(
        'LONGRUN_SANDBOX',
        'it unset or false when LONGRUN_OWNER_URL is set',
        env['LONGRUN_SANDBOX'],
        'the sandbox simulates the owner: it never runs beside a real one',
      );
    return false;
  }
  if (asked !== undefined) {
    if (asked) return true;
    throw new ConfigError('LONGRUN_OWNER_URL', 'an absolute http(s) URL of the owner service', env['LONGRUN_OWNER_URL'], 'required with LONGRUN_SANDBOX=false');
  }
  if (env['NODE_ENV']?.trim() === 'production') {
    throw new ConfigError(
      'LONGRUN_OWNER_URL',
      'an absolute http(s) URL of the owner service (or LONGRUN_SANDBOX=true to run the simulators)',
      env['LONGRUN_OWNER_URL'],
      'required when NODE_ENV=production',
    );
  }
  return true;
}

const redisUrlForms = 'redis://, rediss://, redis+sentinel:// or rediss+sentinel:// (see docs/configuration.md)';
const clusterUrlForms = 'redis://[[user]:password@]host:port[,host:port…] or rediss://… naming nodes of the cluster (see docs/configuration.md)';

function parseRedis(env: Env, keys: RedisKeyScheme): RedisTarget | undefined {
  const raw = env['LONGRUN_REDIS_URL']?.trim();
  if (raw === undefined || raw === '') {
    if (keys === 'cluster') throw new ConfigError('LONGRUN_REDIS_URL', `with LONGRUN_REDIS_KEYS=cluster, ${clusterUrlForms}`, raw);
    return undefined;
  }
  try {
    return parseRedisUrl(raw, { cluster: keys === 'cluster' });
  } catch (err) {
    if (err instanceof RedisUrlError) {
      throw new ConfigError(
        'LONGRUN_REDIS_URL',
        keys === 'cluster' ? `with LONGRUN_REDIS_KEYS=cluster, ${clusterUrlForms}` : `a URL of the form ${redisUrlForms}`,
        raw,
        err.message,
      );
    }
    throw err;
  }
}

/** What a gateway reads of its Redis: where it is, its key scheme, and its deadlines. */
export type RedisConfig = Pick<Config, 'redis' | 'redisKeys' | 'redisCommandTimeoutMs' | 'redisConnectTimeoutMs'>;

/**
 * The LONGRUN_REDIS_* variables that say which Redis the gateway uses and how to reach it,
 * read as loadConfig reads them (it calls this): `longrun store mark` (src/cli/) reads
 * nothing else. Throws ConfigError on the first invalid one.
 */
export function loadRedisConfig(env: Env = process.env): RedisConfig {
  const redisKeys = read(env, 'LONGRUN_REDIS_KEYS', z.enum(redisKeySchemes), redisKeySchemes.join(' or '), 'workhorse');
  return {
    redis: parseRedis(env, redisKeys),
    redisKeys,
    // A renewal must fail well inside the lease TTL, and a detached execute must answer
    // 503 at once rather than hang when Redis is away.
    redisCommandTimeoutMs: readMs(env, 'LONGRUN_REDIS_COMMAND_TIMEOUT_MS', 2_000),
    redisConnectTimeoutMs: readMs(env, 'LONGRUN_REDIS_CONNECT_TIMEOUT_MS', 2_000),
  };
}

/** LONGRUN_WS_ALLOWED_ORIGINS: `scheme://host[:port]` origins, normalised as browsers send them. */
const originList = z.string().transform((text, ctx) => {
  const origins: string[] = [];
  for (const item of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    let url: URL;
    try {
      url = new URL(item);
    } catch {
      ctx.addIssue({ code: 'custom', message: `not an origin: ${item}` });
      return z.NEVER;
    }
    if (url.origin === 'null' || url.pathname !== '/' || url.search || url.hash || item.replace(/\/$/, '').toLowerCase() !== url.origin) {
      ctx.addIssue({ code: 'custom', message: `not an origin: ${item}` });
      return z.NEVER;
    }
    origins.push(url.origin);
  }
  return origins;
});

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

/**
 * The gateway's Config from an EnvConfig whose owner URL and secret are set (by the
 * environment or by the sandbox). Throws ConfigError when they are not.
 */
export function gatewayConfig(config: Omit<EnvConfig, 'sandbox'>): Config {
  const { ownerUrl, secret } = config;
  if (!ownerUrl) throw new ConfigError('LONGRUN_OWNER_URL', 'an absolute http(s) URL (or the sandbox)', undefined);
  if (!secret) throw new ConfigError('LONGRUN_SECRET_FILE', 'a path (required when LONGRUN_OWNER_URL is set)', undefined);
  return { ...config, ownerUrl, relayUrl: config.relayUrl ?? ownerUrl, secret };
}

const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Parses the environment into a Config. Throws ConfigError on the first invalid variable. */
export function loadConfig(env: Env = process.env): EnvConfig {
  for (const [name, instead] of Object.entries(removedVariables)) {
    if (env[name] !== undefined && env[name] !== '') throw new ConfigError(name, 'it unset', env[name], `no longer read: ${instead}`);
  }
  const ownerUrl = parseServiceUrl(env, 'LONGRUN_OWNER_URL');
  const sandbox = parseSandbox(env, ownerUrl);
  const relayUrl = parseRelayUrl(env, ownerUrl);
  const secretFile = env['LONGRUN_SECRET_FILE'];
  let secret: Buffer | undefined;
  if (secretFile !== undefined && secretFile !== '') secret = readSecretFile(secretFile);
  else if (ownerUrl) throw new ConfigError('LONGRUN_SECRET_FILE', 'a path (required when LONGRUN_OWNER_URL is set)', secretFile);

  const redisConfig = loadRedisConfig(env);

  const leaseTtlMs = read(env, 'LONGRUN_LEASE_TTL_MS', durationMs.min(30), 'an integer number of milliseconds >= 30', 60_000);

  return {
    listen: parseListen(env, 'LONGRUN_LISTEN', '127.0.0.1:8181'),
    opsListen: parseListen(env, 'LONGRUN_OPS_LISTEN', '127.0.0.1:9181'),
    sandbox,
    ownerUrl,
    relayUrl,
    secret,
    ...redisConfig,
    redisConfigureNotifications: read(env, 'LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS', flag, 'true or false', false),
    acceptWaitMs: readMs(env, 'LONGRUN_ACCEPT_WAIT_MS', 10_000),
    // A connection (TLS included) takes well under a second; a service that accepts TCP
    // and never speaks HTTP/2 must not hold the caller for the whole accept wait.
    streamOpenTimeoutMs: readMs(env, 'LONGRUN_STREAM_OPEN_TIMEOUT_MS', 5_000),
    // Three keepalive periods: a caller reading nothing for a minute is not coming back.
    callerStallMs: readMs(env, 'LONGRUN_CALLER_STALL_MS', 60_000),
    // 20 min: GitLab fails a workflow left `running` 30 min without an update
    // (CleanStuckWorkflowsService), and a run silent to its limit, then a rate-limited
    // re-dispatch, must fit in that (test/unit/stuck-workflow-bounds.test.ts); also well
    // below the workflow service's one-hour stream cap and two-hour token TTL.
    runLimitMs: readMs(env, 'LONGRUN_RUN_LIMIT_MS', 1_200_000),
    stopAckTimeoutMs: readMs(env, 'LONGRUN_STOP_ACK_TIMEOUT_MS', 10_000),
    leaseTtlMs,
    stopPollMs: readMs(env, 'LONGRUN_STOP_POLL_MS', 5_000),
    stopKeyTtlMs: readMs(env, 'LONGRUN_STOP_KEY_TTL_MS', 600_000),
    keepaliveMs: readMs(env, 'LONGRUN_KEEPALIVE_MS', 20_000),
    shutdownDelayMs: readMsOrZero(env, 'LONGRUN_SHUTDOWN_DELAY_MS', 0),
    // 8 s fits a drain inside Kubernetes' default 10 s SIGTERM→SIGKILL window.
    drainTimeoutMs: readMs(env, 'LONGRUN_DRAIN_TIMEOUT_MS', 8_000),
    // 2 s after the stops leave room for 10 000 lock releases and callbacks (BENCHMARKS.md drain).
    drainReserveMs: readMsOrZero(env, 'LONGRUN_DRAIN_RESERVE_MS', 2_000),
    maxDetachedRuns: read(env, 'LONGRUN_MAX_DETACHED_RUNS', count, 'a non-negative integer', 10_000),
    maxRunsPerActor: read(env, 'LONGRUN_MAX_RUNS_PER_ACTOR', count, 'a non-negative integer (0 = off)', 0),
    wsPingMs: readMs(env, 'LONGRUN_WS_PING_MS', 20_000),
    wsPongTimeoutMs: readMs(env, 'LONGRUN_WS_PONG_TIMEOUT_MS', 30_000),
    wsWriteTimeoutMs: readMs(env, 'LONGRUN_WS_WRITE_TIMEOUT_MS', 60_000),
    wsCloseTimeoutMs: readMs(env, 'LONGRUN_WS_CLOSE_TIMEOUT_MS', 5_000),
    wsStartTimeoutMs: readMs(env, 'LONGRUN_WS_START_TIMEOUT_MS', 60_000),
    wsAllowedOrigins: read(env, 'LONGRUN_WS_ALLOWED_ORIGINS', originList, 'a comma-separated list of origins (scheme://host[:port])', []),
    trustForwardedHost: read(env, 'LONGRUN_TRUST_FORWARDED_HOST', flag, 'true or false', false),
    maxWsSessions: read(env, 'LONGRUN_MAX_WS_SESSIONS', count, 'a non-negative integer', 10_000),
    followIdleMs: readMs(env, 'LONGRUN_FOLLOW_IDLE_MS', 120_000),
    // 20 s: under the 60 s idle timeout of common proxies (nginx's proxy_read_timeout), as the ndjson keepalive.
    followKeepaliveMs: readMs(env, 'LONGRUN_FOLLOW_KEEPALIVE_MS', 20_000),
    // 1 MiB: a few checkpoints; ten thousand followers all stalled hold at most 10 GiB, most hold nothing.
    followBufferBytes: read(env, 'LONGRUN_FOLLOW_BUFFER_BYTES', z.coerce.number().int().min(1), 'a positive integer number of bytes', 1024 * 1024),
    followBacklogEvents: read(env, 'LONGRUN_FOLLOW_BACKLOG_EVENTS', z.coerce.number().int().min(1).max(1_000_000), 'an integer from 1 to 1000000', 512),
    maxFollowersPerWorkflow: read(env, 'LONGRUN_MAX_FOLLOWERS_PER_WORKFLOW', count, 'a non-negative integer', 100),
    maxFollowers: read(env, 'LONGRUN_MAX_FOLLOWERS', count, 'a non-negative integer', 10_000),
    wsResumeWindowMs: readMsOrZero(env, 'LONGRUN_WS_RESUME_WINDOW_MS', 60_000, 'off'),
    wsBacklogBytes: read(env, 'LONGRUN_WS_BACKLOG_BYTES', count, 'a non-negative integer number of bytes', 8 * 1024 * 1024),
    // 32 full backlogs: a pod's parked runs hold at most this much of what the service
    // sent them, whatever their count (size it with the memory limit: docs/deploying.md).
    wsBacklogBudgetBytes: read(env, 'LONGRUN_WS_BACKLOG_BUDGET_BYTES', count, 'a non-negative integer number of bytes', 256 * 1024 * 1024),
    preauthTimeoutMs: readMs(env, 'LONGRUN_PREAUTH_TIMEOUT_MS', 10_000),
    relayTimeoutMs: readMs(env, 'LONGRUN_RELAY_TIMEOUT_MS', 5_000),
    // A tool call may take a while (a search, a build); 30 s bounds a hung MCP server.
    mcpTimeoutMs: readMs(env, 'LONGRUN_MCP_TIMEOUT_MS', 30_000),
    // Discovery holds a run's start (the tools go into it): a few seconds bound a slow
    // server; a detached start also never waits past the accept wait (launcher.ts).
    mcpDiscoveryTimeoutMs: readMs(env, 'LONGRUN_MCP_DISCOVERY_TIMEOUT_MS', 5_000),
    mcpAllowPrivate: read(env, 'LONGRUN_MCP_ALLOW_PRIVATE', flag, 'true or false', false),
    // Enough for thousands of concurrent relays and a drain's burst of callbacks.
    ownerConnections: read(env, 'LONGRUN_OWNER_CONNECTIONS', z.coerce.number().int().min(1).max(65_536), 'an integer from 1 to 65536', 256),
    // Three tries with 100 ms and 300 ms between them fit a drain's budget.
    callbackAttempts: read(env, 'LONGRUN_CALLBACK_ATTEMPTS', z.coerce.number().int().min(1).max(20), 'an integer from 1 to 20', 3),
    callbackTimeoutMs: readMs(env, 'LONGRUN_CALLBACK_TIMEOUT_MS', 2_000),
    // Enough to keep an owner busy (a drain's 5 000 callbacks take about a second at 64),
    // few enough that a drain does not open thousands of requests on it at once.
    callbackConcurrency: read(env, 'LONGRUN_CALLBACK_CONCURRENCY', z.coerce.number().int().min(1).max(10_000), 'an integer from 1 to 10000', 64),
    // Signing per request would cost CPU on the hot path; the owner only wants a fresh iat.
    jwtRefreshMs: read(env, 'LONGRUN_JWT_REFRESH_MS', durationMs.max(JWT_REFRESH_MAX_MS), `an integer number of milliseconds from 1 to ${JWT_REFRESH_MAX_MS}`, 30_000),
    workflowInfraStopReasons: read(
      env,
      'LONGRUN_WORKFLOW_INFRA_STOP_REASONS',
      stopWordList,
      `a comma-separated list of stop words [A-Z][A-Z0-9_]{0,63} that holds ${SERVER_SHUTDOWN}`,
      [...publicInfraStopReasons],
    ),
    grpcStreamsPerConnection: read(env, 'LONGRUN_GRPC_STREAMS_PER_CONNECTION', z.coerce.number().int().min(1).max(10_000), 'an integer from 1 to 10000', 100),
    // 20 s and 20 s: Workhorse's keepalive (and gRPC-Go's default timeout). The real service
    // accepts pings 10 s apart (min_ping_interval_without_data_ms), so 20 s is never a strike.
    grpcKeepaliveTimeMs: readMs(env, 'LONGRUN_GRPC_KEEPALIVE_TIME_MS', 20_000),
    grpcKeepaliveTimeoutMs: readMs(env, 'LONGRUN_GRPC_KEEPALIVE_TIMEOUT_MS', 20_000),
    grpcKeepaliveWithoutCalls: read(env, 'LONGRUN_GRPC_KEEPALIVE_WITHOUT_CALLS', flag, 'true or false', true),
    replicaId: read(
      env,
      'LONGRUN_REPLICA_ID',
      z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/),
      'a name of [A-Za-z0-9_.:-], at most 128 characters',
      `${os.hostname()}-${process.pid}`,
    ),
    tracing: parseTracingConfig(env, (variable, expected, received, problem) => {
      throw new ConfigError(variable, expected, received, problem);
    }),
    logLevel: read(env, 'LONGRUN_LOG_LEVEL', z.enum(logLevels), logLevels.join('|'), 'info'),
  };
}
