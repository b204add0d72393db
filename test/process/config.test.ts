/**
 * Configuration (docs/spec.md §8): every default, every override, and an invalid value of each
 * variable stopping start-up with a ConfigError that names it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gatewayConfig, loadConfig } from '../../src/config';
import { ConfigError } from '../../src/core/env';
import { readSecretFile } from '../../src/owner/settings';
import { startChild } from '../../stack/child';
import { removeSecretFile, testSecret, writeSecretFile } from '../../stack/secret';

let secretFile: string;
let scratch: string;

beforeAll(async () => {
  secretFile = await writeSecretFile();
  scratch = await mkdtemp(path.join(os.tmpdir(), 'longrun-config-'));
});
afterAll(async () => {
  await removeSecretFile(secretFile);
  await rm(scratch, { recursive: true, force: true });
});

async function fileWith(name: string, content: string): Promise<string> {
  const file = path.join(scratch, name);
  await writeFile(file, content);
  return file;
}

/** The ConfigError loadConfig throws for `env`, or a failure if it does not throw one. */
function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw new Error(`expected a ConfigError, got ${String(err)}`);
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(env)}, got a config`);
}

describe('config: defaults', () => {
  it('an empty environment is the sandbox with every docs/spec.md §8 default', () => {
    const config = loadConfig({});
    expect(config).toEqual({
      sandbox: true,
      owner: {
        url: undefined,
        relayUrl: undefined,
        secret: undefined,
        preauthTimeoutMs: 10_000,
        relayTimeoutMs: 5_000,
        connections: 256,
        callbackAttempts: 3,
        callbackTimeoutMs: 2_000,
        callbackConcurrency: 64,
        jwtRefreshMs: 30_000,
      },
      redis: { target: undefined, keys: 'workhorse', commandTimeoutMs: 2_000, connectTimeoutMs: 2_000 },
      coordination: { leaseTtlMs: 60_000, stopPollMs: 5_000, stopKeyTtlMs: 600_000, configureNotifications: false },
      http: { listen: { host: '127.0.0.1', port: 8181 }, opsListen: { host: '127.0.0.1', port: 9181 }, keepaliveMs: 20_000 },
      run: {
        acceptWaitMs: 10_000,
        streamOpenTimeoutMs: 5_000,
        callerStallMs: 60_000,
        runLimitMs: 1_200_000,
        stopAckTimeoutMs: 10_000,
        maxDetachedRuns: 10_000,
        maxRunsPerActor: 0,
        workflowInfraStopReasons: ['WORKHORSE_SERVER_SHUTDOWN', 'WORKHORSE_WEBSOCKET_PING_FAILED'],
      },
      websocket: {
        pingMs: 20_000,
        pongTimeoutMs: 30_000,
        writeTimeoutMs: 60_000,
        closeTimeoutMs: 5_000,
        startTimeoutMs: 60_000,
        resumeWindowMs: 60_000,
        backlogBytes: 8 * 1024 * 1024,
        backlogBudgetBytes: 256 * 1024 * 1024,
        maxSessions: 10_000,
        allowedOrigins: [],
        trustForwardedHost: false,
      },
      follow: { idleMs: 120_000, keepaliveMs: 20_000, bufferBytes: 1024 * 1024, backlogEvents: 512, maxFollowersPerWorkflow: 100, maxFollowers: 10_000 },
      mcp: { callTimeoutMs: 30_000, discoveryTimeoutMs: 5_000, allowPrivate: false },
      workflow: { streamsPerConnection: 100, keepaliveTimeMs: 20_000, keepaliveTimeoutMs: 20_000, keepaliveWithoutCalls: true },
      drain: { shutdownDelayMs: 0, timeoutMs: 8_000, reserveMs: 2_000 },
      replicaId: `${os.hostname()}-${process.pid}`,
      // No OTEL_EXPORTER_OTLP_*ENDPOINT: tracing off (docs/configuration.md#tracing-otel_).
      observability: { tracing: { enabled: false } },
      logLevel: 'info',
    });
  });

  it('an empty string is the default, like an unset variable', () => {
    expect(loadConfig({ LONGRUN_ACCEPT_WAIT_MS: '', LONGRUN_LISTEN: '', LONGRUN_OWNER_URL: '', LONGRUN_REDIS_URL: '' })).toEqual(loadConfig({}));
  });

  it('reads process.env when no environment is given', () => {
    expect(loadConfig().http.listen).toEqual(loadConfig(process.env).http.listen);
  });
});

describe('config: overrides', () => {
  it('reads every variable', () => {
    const config = loadConfig({
      LONGRUN_LISTEN: '0.0.0.0:8080',
      LONGRUN_OPS_LISTEN: '[::1]:0',
      LONGRUN_OWNER_URL: 'https://gitlab.example.com/gitlab/',
      LONGRUN_RELAY_URL: 'http://gitlab-webservice-default.gitlab.svc:8181/gitlab',
      LONGRUN_SECRET_FILE: secretFile,
      LONGRUN_REDIS_URL: 'redis://127.0.0.1:6380/2',
      LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS: 'true',
      LONGRUN_ACCEPT_WAIT_MS: '250',
      LONGRUN_RUN_LIMIT_MS: '60000',
      LONGRUN_STOP_ACK_TIMEOUT_MS: '300',
      LONGRUN_LEASE_TTL_MS: '3000',
      LONGRUN_STOP_POLL_MS: '100',
      LONGRUN_STOP_KEY_TTL_MS: '1000',
      LONGRUN_KEEPALIVE_MS: '50',
      LONGRUN_SHUTDOWN_DELAY_MS: '10',
      LONGRUN_DRAIN_TIMEOUT_MS: '2000',
      LONGRUN_MAX_DETACHED_RUNS: '0',
      LONGRUN_MAX_RUNS_PER_ACTOR: '3',
      LONGRUN_WS_PING_MS: '110',
      LONGRUN_WS_PONG_TIMEOUT_MS: '120',
      LONGRUN_WS_WRITE_TIMEOUT_MS: '130',
      LONGRUN_WS_CLOSE_TIMEOUT_MS: '140',
      LONGRUN_WS_START_TIMEOUT_MS: '160',
      LONGRUN_WS_ALLOWED_ORIGINS: 'https://ide.example.com, HTTP://Chat.Example.com:8443',
      LONGRUN_TRUST_FORWARDED_HOST: 'true',
      LONGRUN_MAX_WS_SESSIONS: '7',
      LONGRUN_FOLLOW_IDLE_MS: '1700',
      LONGRUN_FOLLOW_KEEPALIVE_MS: '1800',
      LONGRUN_FOLLOW_BUFFER_BYTES: '1900',
      LONGRUN_FOLLOW_BACKLOG_EVENTS: '21',
      LONGRUN_MAX_FOLLOWERS_PER_WORKFLOW: '3',
      LONGRUN_MAX_FOLLOWERS: '4',
      LONGRUN_PREAUTH_TIMEOUT_MS: '700',
      LONGRUN_RELAY_TIMEOUT_MS: '800',
      LONGRUN_GRPC_STREAMS_PER_CONNECTION: '1',
      LONGRUN_DRAIN_RESERVE_MS: '500',
      LONGRUN_STREAM_OPEN_TIMEOUT_MS: '600',
      LONGRUN_CALLER_STALL_MS: '700',
      LONGRUN_MCP_TIMEOUT_MS: '900',
      LONGRUN_MCP_DISCOVERY_TIMEOUT_MS: '1200',
      LONGRUN_MCP_ALLOW_PRIVATE: 'true',
      LONGRUN_OWNER_CONNECTIONS: '8',
      LONGRUN_CALLBACK_ATTEMPTS: '5',
      LONGRUN_CALLBACK_TIMEOUT_MS: '1500',
      LONGRUN_CALLBACK_CONCURRENCY: '12',
      LONGRUN_JWT_REFRESH_MS: '1000',
      LONGRUN_REDIS_COMMAND_TIMEOUT_MS: '300',
      LONGRUN_REDIS_CONNECT_TIMEOUT_MS: '400',
      LONGRUN_GRPC_KEEPALIVE_TIME_MS: '150',
      LONGRUN_GRPC_KEEPALIVE_TIMEOUT_MS: '250',
      LONGRUN_GRPC_KEEPALIVE_WITHOUT_CALLS: 'false',
      LONGRUN_REPLICA_ID: 'pod-a.zone-1:2',
      LONGRUN_WORKFLOW_INFRA_STOP_REASONS: ' WORKHORSE_RUN_LIMIT, WORKHORSE_SERVER_SHUTDOWN,WORKHORSE_RUN_LIMIT ',
      LONGRUN_LOG_LEVEL: 'silent',
    });
    expect(config.http.listen).toEqual({ host: '0.0.0.0', port: 8080 });
    expect(config.http.opsListen).toEqual({ host: '::1', port: 0 });
    expect(config.owner.url?.href).toBe('https://gitlab.example.com/gitlab/');
    expect(config.owner.relayUrl?.href).toBe('http://gitlab-webservice-default.gitlab.svc:8181/gitlab');
    expect(config.owner.secret?.equals(testSecret)).toBe(true);
    expect(config.redis.target).toEqual({ mode: 'standalone', url: 'redis://127.0.0.1:6380/2' });
    expect(config.redis.keys).toBe('workhorse');
    expect(config.coordination.configureNotifications).toBe(true);
    expect(config).toMatchObject({
      run: {
        acceptWaitMs: 250,
        runLimitMs: 60_000,
        stopAckTimeoutMs: 300,
        maxDetachedRuns: 0,
        maxRunsPerActor: 3,
        streamOpenTimeoutMs: 600,
        callerStallMs: 700,
        workflowInfraStopReasons: ['WORKHORSE_RUN_LIMIT', 'WORKHORSE_SERVER_SHUTDOWN'],
      },
      coordination: { leaseTtlMs: 3_000, stopPollMs: 100, stopKeyTtlMs: 1_000 },
      http: { keepaliveMs: 50 },
      drain: { shutdownDelayMs: 10, timeoutMs: 2_000, reserveMs: 500 },
      websocket: {
        pingMs: 110,
        pongTimeoutMs: 120,
        writeTimeoutMs: 130,
        closeTimeoutMs: 140,
        startTimeoutMs: 160,
        allowedOrigins: ['https://ide.example.com', 'http://chat.example.com:8443'],
        trustForwardedHost: true,
        maxSessions: 7,
      },
      follow: { idleMs: 1_700, keepaliveMs: 1_800, bufferBytes: 1_900, backlogEvents: 21, maxFollowersPerWorkflow: 3, maxFollowers: 4 },
      owner: {
        preauthTimeoutMs: 700,
        relayTimeoutMs: 800,
        connections: 8,
        callbackAttempts: 5,
        callbackTimeoutMs: 1_500,
        callbackConcurrency: 12,
        jwtRefreshMs: 1_000,
      },
      workflow: { streamsPerConnection: 1, keepaliveTimeMs: 150, keepaliveTimeoutMs: 250, keepaliveWithoutCalls: false },
      mcp: { callTimeoutMs: 900, discoveryTimeoutMs: 1_200, allowPrivate: true },
      redis: { commandTimeoutMs: 300, connectTimeoutMs: 400 },
      replicaId: 'pod-a.zone-1:2',
      logLevel: 'silent',
    });
  });

  it('LONGRUN_RELAY_URL unset: the gateway relays to the owner URL; set, there', () => {
    const owner = { LONGRUN_OWNER_URL: 'http://puma.example:8080/gitlab', LONGRUN_SECRET_FILE: secretFile };
    expect(gatewayConfig(loadConfig(owner)).owner.relayUrl.href).toBe('http://puma.example:8080/gitlab');
    expect(gatewayConfig(loadConfig({ ...owner, LONGRUN_RELAY_URL: 'http://workhorse.example:8181/gitlab' })).owner.relayUrl.href).toBe('http://workhorse.example:8181/gitlab');
  });

  it('trims whitespace around numbers', () => {
    expect(loadConfig({ LONGRUN_ACCEPT_WAIT_MS: ' 1500\n' }).run.acceptWaitMs).toBe(1_500);
  });

  it('without LONGRUN_OWNER_URL: the sandbox outside production; in production only when LONGRUN_SANDBOX asks for it', () => {
    expect(loadConfig({}).sandbox).toBe(true);
    expect(loadConfig({ NODE_ENV: 'development' }).sandbox).toBe(true);
    expect(loadConfig({ NODE_ENV: 'production', LONGRUN_SANDBOX: 'true' }).sandbox).toBe(true);
    expect(loadConfig({ LONGRUN_SANDBOX: '1', LONGRUN_OWNER_URL: '' }).sandbox).toBe(true);
    expect(loadConfig({ NODE_ENV: 'production', LONGRUN_OWNER_URL: 'https://gitlab.example.com', LONGRUN_SECRET_FILE: secretFile }).sandbox).toBe(false);
    expect(loadConfig({ LONGRUN_OWNER_URL: 'https://gitlab.example.com', LONGRUN_SECRET_FILE: secretFile, LONGRUN_SANDBOX: 'false' }).sandbox).toBe(false);
  });

  it('accepts a secret file without LONGRUN_OWNER_URL (sandbox with a fixed secret)', () => {
    const config = loadConfig({ LONGRUN_SECRET_FILE: secretFile });
    expect(config.owner.url).toBeUndefined();
    expect(config.owner.secret?.equals(testSecret)).toBe(true);
  });

  it.each(['redis://localhost:6379', 'rediss://user:pw@redis:6380/0', 'redis://:p%40ss@10.0.0.1'])('hands the single-server Redis URL %s to ioredis as it is', (url) => {
    expect(loadConfig({ LONGRUN_REDIS_URL: url }).redis.target).toEqual({ mode: 'standalone', url });
  });

  it('LONGRUN_REDIS_KEYS=cluster: the URL names seed nodes of a Redis Cluster', () => {
    const config = loadConfig({ LONGRUN_REDIS_KEYS: 'cluster', LONGRUN_REDIS_URL: 'redis://:p%40ss@10.0.0.1:7000,redis-1,[::1]:7002' });
    expect(config.redis.keys).toBe('cluster');
    expect(config.redis.target).toEqual({
      mode: 'cluster',
      nodes: [
        { host: '10.0.0.1', port: 7_000 },
        { host: 'redis-1', port: 6_379 },
        { host: '::1', port: 7_002 },
      ],
      username: undefined,
      password: 'p@ss',
      tls: false,
    });
    expect(loadConfig({ LONGRUN_REDIS_KEYS: 'cluster', LONGRUN_REDIS_URL: 'rediss://app:pw@c1:7000' }).redis.target).toMatchObject({ mode: 'cluster', username: 'app', tls: true });
    expect(loadConfig({}).redis.keys).toBe('workhorse');
    expect(loadConfig({}).owner.callbackConcurrency).toBe(64);
  });

  it('LONGRUN_REDIS_KEYS=cluster refuses what a Cluster cannot be: no URL, Sentinel, a database, query options', () => {
    for (const url of [undefined, 'redis+sentinel://s1/m', 'redis://c1:7000/2', 'redis://c1:7000?db=1', 'redis://c1:7000,,c2']) {
      const err = configError({ LONGRUN_REDIS_KEYS: 'cluster', ...(url === undefined ? {} : { LONGRUN_REDIS_URL: url }) });
      expect(err.variable, String(url)).toBe('LONGRUN_REDIS_URL');
      expect(err.message, String(url)).toContain('LONGRUN_REDIS_KEYS=cluster');
    }
  });

  it('parses a Sentinel URL into its Sentinels, master name, database and credentials', () => {
    const config = loadConfig({ LONGRUN_REDIS_URL: ' redis+sentinel://:s3cr%40t@s1.example:26380,10.0.0.2,[::1]:26381/my-primary?db=3&sentinel_password=sp ' });
    expect(config.redis.target).toEqual({
      mode: 'sentinel',
      sentinels: [
        { host: 's1.example', port: 26_380 },
        { host: '10.0.0.2', port: 26_379 },
        { host: '::1', port: 26_381 },
      ],
      masterName: 'my-primary',
      db: 3,
      username: undefined,
      password: 's3cr@t',
      sentinelUsername: undefined,
      sentinelPassword: 'sp',
      tls: false,
    });
  });

  it.each([
    ['true', true],
    ['TRUE', true],
    ['1', true],
    ['false', false],
    ['0', false],
    ['', false],
  ])('LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS=%j is %s', (value, expected) => {
    expect(loadConfig({ LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS: value }).coordination.configureNotifications).toBe(expected);
  });

  it.each([
    ['1', true],
    ['0', false],
    ['FALSE', false],
    ['', true],
  ])('LONGRUN_GRPC_KEEPALIVE_WITHOUT_CALLS=%j is %s, as every switch reads it', (value, expected) => {
    expect(loadConfig({ LONGRUN_GRPC_KEEPALIVE_WITHOUT_CALLS: value }).workflow.keepaliveWithoutCalls).toBe(expected);
  });

  it('reads a secret file written without a trailing newline', async () => {
    const file = await fileWith('no-newline', testSecret.toString('base64'));
    expect(readSecretFile(file).equals(testSecret)).toBe(true);
  });
});

describe('config: invalid values name the variable', () => {
  it.each([
    ['LONGRUN_LISTEN', 'nope'],
    ['LONGRUN_LISTEN', '127.0.0.1'],
    ['LONGRUN_LISTEN', '127.0.0.1:70000'],
    ['LONGRUN_LISTEN', ':8080'],
    ['LONGRUN_OPS_LISTEN', 'localhost:http'],
    ['LONGRUN_OWNER_URL', 'ftp://x'],
    ['LONGRUN_OWNER_URL', 'not a url'],
    ['LONGRUN_OWNER_URL', '/relative/path'],
    ['LONGRUN_RELAY_URL', 'ftp://x'],
    ['LONGRUN_RELAY_URL', 'not a url'],
    ['LONGRUN_REDIS_URL', 'http://127.0.0.1:6379'],
    ['LONGRUN_REDIS_URL', '127.0.0.1:6379'],
    ['LONGRUN_REDIS_URL', 'redis+sentinel://s1:26379'],
    ['LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS', 'yes'],
    ['LONGRUN_ACCEPT_WAIT_MS', 'abc'],
    ['LONGRUN_ACCEPT_WAIT_MS', '0'],
    ['LONGRUN_ACCEPT_WAIT_MS', '1.5'],
    ['LONGRUN_ACCEPT_WAIT_MS', '-1'],
    // Above Node's 2^31-1 ms timer clamp, a timer would fire at once.
    ['LONGRUN_RUN_LIMIT_MS', String(2 ** 31)],
    ['LONGRUN_RUN_LIMIT_MS', '55m'],
    ['LONGRUN_STOP_ACK_TIMEOUT_MS', 'ten'],
    ['LONGRUN_LEASE_TTL_MS', '10'],
    ['LONGRUN_STOP_POLL_MS', '0'],
    ['LONGRUN_STOP_KEY_TTL_MS', 'x'],
    ['LONGRUN_KEEPALIVE_MS', '0'],
    ['LONGRUN_SHUTDOWN_DELAY_MS', '-5'],
    ['LONGRUN_DRAIN_TIMEOUT_MS', '0'],
    ['LONGRUN_MAX_DETACHED_RUNS', '-1'],
    ['LONGRUN_MAX_DETACHED_RUNS', 'many'],
    ['LONGRUN_MAX_RUNS_PER_ACTOR', '2.5'],
    ['LONGRUN_WS_PING_MS', '0'],
    ['LONGRUN_WS_PONG_TIMEOUT_MS', 'soon'],
    ['LONGRUN_MAX_WS_SESSIONS', '-1'],
    ['LONGRUN_WS_BACKLOG_BUDGET_BYTES', '1.5'],
    ['LONGRUN_WS_ALLOWED_ORIGINS', 'ide.example.com'],
    ['LONGRUN_WS_ALLOWED_ORIGINS', 'https://ide.example.com/path'],
    ['LONGRUN_TRUST_FORWARDED_HOST', 'maybe'],
    ['LONGRUN_PREAUTH_TIMEOUT_MS', 'soon'],
    ['LONGRUN_RELAY_TIMEOUT_MS', '0'],
    ['LONGRUN_GRPC_STREAMS_PER_CONNECTION', '0'],
    ['LONGRUN_GRPC_STREAMS_PER_CONNECTION', '10001'],
    ['LONGRUN_DRAIN_RESERVE_MS', '-1'],
    ['LONGRUN_STREAM_OPEN_TIMEOUT_MS', '0'],
    ['LONGRUN_CALLER_STALL_MS', 'soon'],
    ['LONGRUN_MCP_TIMEOUT_MS', '0'],
    ['LONGRUN_MCP_DISCOVERY_TIMEOUT_MS', '0'],
    ['LONGRUN_MCP_ALLOW_PRIVATE', 'yes'],
    ['LONGRUN_MCP_ALLOW_PRIVATE', 'on'],
    ['LONGRUN_OWNER_CONNECTIONS', '0'],
    ['LONGRUN_CALLBACK_ATTEMPTS', '0'],
    ['LONGRUN_CALLBACK_ATTEMPTS', '21'],
    ['LONGRUN_CALLBACK_TIMEOUT_MS', 'x'],
    ['LONGRUN_CALLBACK_CONCURRENCY', '0'],
    ['LONGRUN_REDIS_KEYS', 'tagged'],
    ['LONGRUN_JWT_REFRESH_MS', '0'],
    // Rails refuses a Gitlab-Workhorse-Api-Request issued more than 90 s ago.
    ['LONGRUN_JWT_REFRESH_MS', '60001'],
    ['LONGRUN_REDIS_COMMAND_TIMEOUT_MS', '1.5'],
    ['LONGRUN_REDIS_CONNECT_TIMEOUT_MS', '-3'],
    ['LONGRUN_GRPC_KEEPALIVE_TIME_MS', '0'],
    ['LONGRUN_GRPC_KEEPALIVE_TIMEOUT_MS', '20s'],
    ['LONGRUN_GRPC_KEEPALIVE_WITHOUT_CALLS', 'yes'],
    ['LONGRUN_SANDBOX', 'yes'],
    ['LONGRUN_WORKFLOW_INFRA_STOP_REASONS', 'WORKHORSE_SERVER_SHUTDOWN,lower_case'],
    ['LONGRUN_WORKFLOW_INFRA_STOP_REASONS', 'WORKHORSE_RUN_LIMIT'],
    ['LONGRUN_WORKFLOW_INFRA_STOP_REASONS', `WORKHORSE_SERVER_SHUTDOWN,${'X'.repeat(65)}`],
    // Removed: one way to say what the service allowlists (a value left set must not be ignored).
    ['LONGRUN_STOP_REASON_DRAIN', 'WORKHORSE_SERVER_SHUTDOWN'],
    ['LONGRUN_STOP_REASON_RUN_LIMIT', 'WORKHORSE_RUN_LIMIT'],
    ['LONGRUN_STOP_REASON_LOCK_LOST', 'WORKHORSE_SERVER_SHUTDOWN'],
    // Renamed with the follow route (…/events was Rails' path): an old name left set stops start-up.
    ['LONGRUN_WATCH_IDLE_MS', '120000'],
    ['LONGRUN_MAX_WATCHERS', '10'],
    ['LONGRUN_REPLICA_ID', 'has space'],
    ['LONGRUN_REPLICA_ID', 'x'.repeat(129)],
    ['LONGRUN_LOG_LEVEL', 'loud'],
    ['LONGRUN_LOG_LEVEL', 'INFO'],
  ])('%s=%j', (variable, value) => {
    const err = configError({ [variable]: value });
    expect(err.variable).toBe(variable);
    expect(err.name).toBe('ConfigError');
    expect(err.message).toContain(variable);
    expect(err.message).toContain(JSON.stringify(value));
  });

  it.each([
    ['LONGRUN_WATCH_IDLE_MS', 'LONGRUN_FOLLOW_IDLE_MS'],
    ['LONGRUN_WATCH_KEEPALIVE_MS', 'LONGRUN_FOLLOW_KEEPALIVE_MS'],
    ['LONGRUN_WATCH_BUFFER_BYTES', 'LONGRUN_FOLLOW_BUFFER_BYTES'],
    ['LONGRUN_WATCH_BACKLOG_EVENTS', 'LONGRUN_FOLLOW_BACKLOG_EVENTS'],
    ['LONGRUN_MAX_WATCHERS_PER_WORKFLOW', 'LONGRUN_MAX_FOLLOWERS_PER_WORKFLOW'],
    ['LONGRUN_MAX_WATCHERS', 'LONGRUN_MAX_FOLLOWERS'],
  ])('%s, renamed, stops start-up with a message naming %s', (old, renamed) => {
    const err = configError({ [old]: '5' });
    expect(err.variable).toBe(old);
    expect(err.message).toContain(`renamed ${renamed}`);
  });

  it.each([
    [{ NODE_ENV: 'production' }, /required when NODE_ENV=production.*LONGRUN_SANDBOX=true/],
    [{ NODE_ENV: 'production', LONGRUN_OWNER_URL: '' }, /required when NODE_ENV=production/],
    [{ LONGRUN_SANDBOX: 'false' }, /required with LONGRUN_SANDBOX=false/],
  ])('no owner where the sandbox is not the default (%j): LONGRUN_OWNER_URL is required', (env, problem) => {
    const err = configError(env);
    expect(err.variable).toBe('LONGRUN_OWNER_URL');
    expect(err.message).toMatch(problem);
  });

  it('LONGRUN_SANDBOX=true beside a real owner is refused', () => {
    const err = configError({ LONGRUN_SANDBOX: 'true', LONGRUN_OWNER_URL: 'https://gitlab.example.com', LONGRUN_SECRET_FILE: secretFile });
    expect(err.variable).toBe('LONGRUN_SANDBOX');
    expect(err.message).toMatch(/never runs beside a real one/);
  });

  it('LONGRUN_RELAY_URL with the sandbox is refused: its relays go to its simulated owner', () => {
    const err = configError({ LONGRUN_RELAY_URL: 'http://workhorse.example:8181' });
    expect(err.variable).toBe('LONGRUN_RELAY_URL');
    expect(err.message).toMatch(/the sandbox relays to its simulated owner/);
  });

  it('LONGRUN_OWNER_URL without LONGRUN_SECRET_FILE', () => {
    const err = configError({ LONGRUN_OWNER_URL: 'http://127.0.0.1:3000' });
    expect(err.variable).toBe('LONGRUN_SECRET_FILE');
    expect(err.message).toMatch(/LONGRUN_SECRET_FILE.*required when LONGRUN_OWNER_URL is set/);
  });

  it('a secret file that does not exist', () => {
    const missing = path.join(scratch, 'missing');
    const err = configError({ LONGRUN_OWNER_URL: 'http://127.0.0.1:3000', LONGRUN_SECRET_FILE: missing });
    expect(err.variable).toBe('LONGRUN_SECRET_FILE');
    expect(err.message).toContain(missing);
  });

  it.each([
    ['16 bytes', () => Buffer.alloc(16, 1).toString('base64')],
    ['33 bytes', () => Buffer.alloc(33, 1).toString('base64')],
    ['not base64', () => 'this is not base64 at all!!!!!!!!!!!!!!!!!!!'],
    ['raw 32 bytes, not encoded', () => testSecret.toString('utf8')],
    ['empty', () => ''],
  ])('a secret file holding %s', async (label, content) => {
    const file = await fileWith(`secret-${label.replace(/\W+/g, '-')}`, content());
    const err = configError({ LONGRUN_OWNER_URL: 'http://127.0.0.1:3000', LONGRUN_SECRET_FILE: file });
    expect(err.variable).toBe('LONGRUN_SECRET_FILE');
    expect(err.message).toContain('LONGRUN_SECRET_FILE');
    expect(err.message).toMatch(/base64 of 32 bytes/);
    // The message names the file, never what is in it.
    expect(err.message).not.toContain(testSecret.toString('utf8'));
  });

  it('the first invalid variable stops loading', () => {
    expect(() => loadConfig({ LONGRUN_LOG_LEVEL: 'loud', LONGRUN_ACCEPT_WAIT_MS: 'abc' })).toThrow(ConfigError);
  });
});

describe('config: a credential in an invalid value is never printed (issue [11] point 7)', () => {
  // Each value holds the secret 'hunter2' (and 'hunter3' for a Sentinel password).
  const cases: Array<[string, string, RegExp, string]> = [
    ['LONGRUN_REDIS_URL', 'redis+sentinel://:hunter2@s1:26379', /master name is missing/, 'redis+sentinel://:***@s1:26379'],
    ['LONGRUN_REDIS_URL', 'redis+sentinel://:hunter2@s1:26379/m?sentinel_password=hunter3&bogus=1', /unknown option "bogus"/, 'sentinel_password=***'],
    ['LONGRUN_REDIS_URL', 'redis+sentinel://:hunt/er2@s1/m', /reserved character/, 'redis+sentinel://:***@s1/m'],
    ['LONGRUN_REDIS_URL', 'redis+sentinel://hunter2@s1/m', /no ':'/, 'redis+sentinel://***@s1/m'],
    ['LONGRUN_REDIS_URL', 'redis://app:hunter2@redis:99999', /not a valid URL/, 'redis://app:***@redis:99999'],
    ['LONGRUN_REDIS_URL', 'memcached://:hunter2@cache', /unsupported scheme/, 'memcached://:***@cache'],
    ['LONGRUN_OWNER_URL', 'ftp://user:hunter2@owner.example', /unsupported scheme "ftp:\/\/"/, 'ftp://user:***@owner.example'],
    ['LONGRUN_OWNER_URL', 'https://user:hunter2@owner.example/', /credentials in the URL are not used/, 'https://user:***@owner.example/'],
    ['LONGRUN_OWNER_URL', 'https://user:hunter2@owner example', /not an absolute URL/, 'https://user:***@owner example'],
    ['LONGRUN_RELAY_URL', 'http://user:hunter2@workhorse:8181/', /credentials in the URL are not used/, 'http://user:***@workhorse:8181/'],
  ];

  it.each(cases)('%s=%s', (variable, value, problem, shown) => {
    const err = configError({ [variable]: value, LONGRUN_SECRET_FILE: secretFile });
    expect(err.variable).toBe(variable);
    expect(err.message).toMatch(new RegExp(`^invalid ${variable}: `));
    expect(err.message).toMatch(problem);
    expect(err.message).toContain(shown);
    expect(err.message).not.toMatch(/hunter|hunt\/er/);
  });

  it('start-up output names the variable and the problem, never the password', async () => {
    const main = path.resolve(__dirname, '../../dist/src/main.js');
    const chosen = cases.filter(([v]) => v === 'LONGRUN_OWNER_URL').concat(cases.slice(0, 2));
    const children = chosen.map(([variable, value]) => startChild([main], { LONGRUN_OWNER_URL: '', LONGRUN_REDIS_URL: '', [variable]: value, LONGRUN_SECRET_FILE: secretFile }));
    try {
      for (const [i, [variable, , problem]] of chosen.entries()) {
        const child = children[i] as (typeof children)[number];
        expect(await child.exited(15_000)).toBe(1);
        expect(child.stderr()).toContain(`longrun: invalid ${variable}: `);
        expect(child.stderr()).toMatch(problem);
        expect(child.stdout() + child.stderr()).not.toMatch(/hunter|hunt\/er/);
      }
    } finally {
      await Promise.all(children.map((c) => c.kill()));
    }
  });
});
