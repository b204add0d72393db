/**
 * Configuration (docs/spec.md §8): every LONGRUN_* variable parsed once into one typed,
 * fully-defaulted Config, a section per part. Each part reads its own variables in its own
 * folder (`<part>/settings.ts`, with the primitives of core/env.ts); this file composes the
 * sections and holds what spans them: the variables that are gone, whether the sandbox runs,
 * the replica's name and the log level. An invalid value throws ConfigError naming the
 * variable and what was expected; main() prints it and exits 1.
 */
import os from 'node:os';
import { z } from 'zod';
import { ConfigError, flag, read, type Env } from './core/env';
import { readCoordinationSettings, type CoordinationSettings } from './coordination/settings';
import { readDrainSettings, type DrainSettings } from './drain';
import { readFollowSettings, type FollowSettings } from './follow/settings';
import { readHttpSettings, type HttpSettings } from './http/settings';
import { readMcpSettings, type McpSettings } from './mcp/settings';
import { readObservabilitySettings, type ObservabilitySettings } from './observability/settings';
import { ownerSettingsOf, readOwnerSettings, readOwnerUrls, type OwnerEnvSettings, type OwnerSettings } from './owner/settings';
import { readRedisSettings, type RedisSettings } from './redis/settings';
import { readRunSettings, type RunSettings } from './run/settings';
import { readWebSocketSettings, type WebSocketSettings } from './websocket/settings';
import { readWorkflowSettings, type WorkflowSettings } from './workflow/settings';

const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
type LogLevel = (typeof logLevels)[number];

/**
 * What the gateway runs with: every setting fully defaulted, units in the names, a section
 * per part. The owner URL and secret are required here; only the environment may leave
 * them to the sandbox (EnvConfig), which fills them in before a gateway starts.
 */
export interface Config {
  http: HttpSettings;
  websocket: WebSocketSettings;
  follow: FollowSettings;
  coordination: CoordinationSettings;
  /** Which Redis, if any: coordination, the follow log and the bridges share it. */
  redis: RedisSettings;
  owner: OwnerSettings;
  mcp: McpSettings;
  run: RunSettings;
  workflow: WorkflowSettings;
  observability: ObservabilitySettings;
  drain: DrainSettings;
  replicaId: string;
  logLevel: LogLevel;
}

/** The environment read: a Config whose owner URL and secret may be left to the sandbox. */
export type EnvConfig = Omit<Config, 'owner'> & {
  /**
   * The sandbox (docs/spec.md §9) provides the owner and workflow services: asked for by
   * LONGRUN_SANDBOX=true, or the default with no LONGRUN_OWNER_URL outside production.
   */
  sandbox: boolean;
  owner: OwnerEnvSettings;
};

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

/**
 * Whether the sandbox runs (docs/configuration.md "The sandbox"). Without an owner it is
 * the default only outside production: an image (NODE_ENV=production) started without
 * its owner must stop, not serve simulated answers on all interfaces and report Ready.
 * There it runs only when asked for by name, and never beside a real owner.
 */
function readSandbox(env: Env, ownerUrl: URL | undefined): boolean {
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

/**
 * The gateway's Config from an EnvConfig whose owner URL and secret are set (by the
 * environment or by the sandbox). Throws ConfigError when they are not.
 */
export function gatewayConfig(config: Omit<EnvConfig, 'sandbox'>): Config {
  return { ...config, owner: ownerSettingsOf(config.owner) };
}

/** Parses the environment into a Config. Throws ConfigError on the first invalid variable. */
export function loadConfig(env: Env = process.env): EnvConfig {
  for (const [name, instead] of Object.entries(removedVariables)) {
    if (env[name] !== undefined && env[name] !== '') throw new ConfigError(name, 'it unset', env[name], `no longer read: ${instead}`);
  }
  const ownerUrls = readOwnerUrls(env);
  const sandbox = readSandbox(env, ownerUrls.url);
  // Only beside a real owner: the sandbox's relays go to its simulated owner, and sending
  // its made-up token to a real GitLab would only be refused.
  if (ownerUrls.relayUrl && !ownerUrls.url) {
    throw new ConfigError('LONGRUN_RELAY_URL', 'it unset with the sandbox', env['LONGRUN_RELAY_URL'], 'the sandbox relays to its simulated owner');
  }
  return {
    sandbox,
    owner: readOwnerSettings(env, ownerUrls),
    redis: readRedisSettings(env),
    coordination: readCoordinationSettings(env),
    http: readHttpSettings(env),
    run: readRunSettings(env),
    websocket: readWebSocketSettings(env),
    follow: readFollowSettings(env),
    mcp: readMcpSettings(env),
    workflow: readWorkflowSettings(env),
    drain: readDrainSettings(env),
    replicaId: read(
      env,
      'LONGRUN_REPLICA_ID',
      z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/),
      'a name of [A-Za-z0-9_.:-], at most 128 characters',
      `${os.hostname()}-${process.pid}`,
    ),
    observability: readObservabilitySettings(env),
    logLevel: read(env, 'LONGRUN_LOG_LEVEL', z.enum(logLevels), logLevels.join('|'), 'info'),
  };
}
