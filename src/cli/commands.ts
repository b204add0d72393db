/**
 * The `longrun` executable's commands besides the gateway itself (package.json `bin`, the
 * image's /usr/local/bin/longrun): `longrun` alone starts the gateway (main.ts); `longrun
 * store mark` marks the Redis the gateway would use as a new store (store-mark.ts), read from
 * LONGRUN_REDIS_URL and LONGRUN_REDIS_KEYS exactly as the gateway reads them.
 *
 * Exit status: 0 done; 1 an error (a bad or missing variable, Redis unreachable or failing);
 * 2 a usage error; 3 refused (nothing was changed).
 */
import { ConfigError } from '../core/env';
import { readRedisSettings } from '../redis/settings';
import { scrubLine } from '../core/log';
import { StoreMarkError, markNewStore, type PrimaryMark, type StoreMarkResult } from '../coordination/store-mark';

const exitCodes = { ok: 0, error: 1, usage: 2, refused: 3 } as const;

const USAGE = `usage: longrun               start the gateway (configured by LONGRUN_* variables: docs/configuration.md)
       longrun store mark    mark the Redis of LONGRUN_REDIS_URL as a new store, so that the gateways
                             grant its first locks at once (docs/deploying.md "A new Redis")
`;

export interface CommandOutput {
  out: { write(text: string): unknown };
  err: { write(text: string): unknown };
}

/** Runs the command `args` names (process.argv after the script); resolves with the exit status. */
export async function runCommand(args: readonly string[], env: NodeJS.ProcessEnv, io: CommandOutput): Promise<number> {
  if (args.length === 2 && args[0] === 'store' && args[1] === 'mark') return storeMark(env, io);
  if (args.length === 1 && (args[0] === 'help' || args[0] === '--help' || args[0] === '-h')) {
    io.out.write(USAGE);
    return exitCodes.ok;
  }
  io.err.write(`longrun: unknown command: ${args.join(' ')}\n${USAGE}`);
  return exitCodes.usage;
}

async function storeMark(env: NodeJS.ProcessEnv, io: CommandOutput): Promise<number> {
  const say = (text: string): void => void io.err.write(`longrun store mark: ${scrubLine(text)}\n`);
  let config;
  try {
    config = readRedisSettings(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    say(err.message);
    return exitCodes.error;
  }
  if (!config.target) {
    say('LONGRUN_REDIS_URL is not set: the gateway then keeps its locks in its own process, and there is no store to mark');
    return exitCodes.error;
  }
  let result: StoreMarkResult;
  try {
    result = await markNewStore(config.target, { connectTimeoutMs: config.connectTimeoutMs, commandTimeoutMs: Math.max(config.commandTimeoutMs, 5_000) });
  } catch (err) {
    if (!(err instanceof StoreMarkError)) throw err;
    say(err.message);
    return exitCodes.error;
  }
  const lines = result.primaries.map((p) => `  ${p.primary}  ${describe(p)}\n`).join('');
  if (result.outcome === 'refused') {
    say(`refused, nothing was changed: ${result.redis} may have served a fleet, and only the store fence can tell a store that lost its data from a new one\n${lines.trimEnd()}`);
    return exitCodes.refused;
  }
  const fresh = result.primaries.filter((p) => p.state === 'marked').length;
  const verb = fresh === 0 ? 'was marked already' : 'is marked as a new store';
  io.out.write(`longrun store mark: ${result.redis} ${verb}: gateways grant its first locks at once\n${lines}`);
  return exitCodes.ok;
}

function describe(mark: PrimaryMark): string {
  switch (mark.state) {
    case 'marked':
      return 'marked';
    case 'already':
      return 'marked already';
    case 'lock_keys':
      return `holds ${mark.lockKeys} lock key${mark.lockKeys === 1 ? '' : 's'} (${mark.example}${(mark.lockKeys ?? 0) > 1 ? ', …' : ''})`;
    case 'promoted':
      return 'a replica promoted since it started (a failover), without a marker';
    case 'lost':
      return mark.fenceLeftMs
        ? `lost its data: fenced for ${Math.ceil(mark.fenceLeftMs / 1_000)} s more`
        : 'lost its data: its marker names another server (a restart or a failover)';
  }
}
