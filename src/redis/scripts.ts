/**
 * The one Lua loader: every script longrun sends Redis is read and defined here (ioredis
 * `defineCommand`: EVALSHA, and EVAL once where the server lacks the script).
 *
 * The rule, for every .lua file in src:
 * - A script stays beside the code that calls it (coordination/, follow/, websocket/bridge/).
 *   The build copies every .lua file under src/ beside its module in dist/ (scripts/copy-assets.mjs),
 *   so the caller's `__dirname` finds it under vitest and after a build alike.
 * - A command's file name carries its key count, as BullMQ's `commands/` names do:
 *   `acquire-lock-2.lua` is the command `acquireLock`, its first 2 arguments KEYS, the rest
 *   ARGV. The loader defines a command from its file name alone.
 * - A file without a key count is a prelude (`store-fence.lua`): never a command of its own,
 *   composed explicitly into the commands that need it, before the script — after the
 *   Cluster flag line (`#!lua flags=allow-cross-slot-keys`), which must come first.
 * - A script's header names its KEYS, ARGV and what it returns.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { RedisClient } from './connection';

/** `acquire-lock-2` → `acquire-lock`: the key count dropped (never for a name without one). */
type WithoutKeyCount<Base extends string> = Base extends `${infer Head}-${infer Tail}` ? (Tail extends `${number}` ? Head : `${Head}-${WithoutKeyCount<Tail>}`) : never;
type CamelCase<Name extends string> = Name extends `${infer Head}-${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : Name;

/** The command a script file defines, as the compiler sees it: `acquire-lock-2.lua` → `acquireLock`. */
export type CommandName<File extends string> = File extends `${infer Base}.lua` ? CamelCase<WithoutKeyCount<Base>> : never;

/** A command file: kebab-case words, then `-<key count>.lua`. */
const COMMAND_FILE = /^([a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)*)-(\d+)\.lua$/;
/** A prelude file: kebab-case words without a key count. */
const PRELUDE_FILE = /^[a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)*\.lua$/;

/**
 * On a Redis Cluster a script that reaches keys of several slots (all served by the primary
 * the call is sent to) must say so; Redis 7 reads this from the script's first line.
 */
const CROSS_SLOT_FLAG = '#!lua flags=allow-cross-slot-keys\n';

export interface LuaCommand<Name extends string = string> {
  /** The ioredis command name (`acquireLock`). */
  readonly name: Name;
  readonly numberOfKeys: number;
  /** The whole script sent: flag line, preludes, the file. */
  readonly lua: string;
}

/** What is put before a script, in this order. */
export interface LuaComposition {
  /** The Cluster flag line (`allow-cross-slot-keys`): for a script sent to a Cluster that reaches keys of several slots. */
  crossSlot?: boolean;
  /** Prelude files of the script's folder (no key count in their names), each defining functions the script calls. */
  preludes?: readonly string[];
}

/** The command name and key count a file name gives, or undefined when it names no command (a prelude, or not Lua). */
export function commandOfFile(file: string): { name: string; numberOfKeys: number } | undefined {
  const match = COMMAND_FILE.exec(file);
  if (!match) return undefined;
  return { name: (match[1] as string).replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase()), numberOfKeys: Number(match[2]) };
}

/** Whether a file name is a prelude's (kebab-case, no key count). */
export function isPreludeFile(file: string): boolean {
  return PRELUDE_FILE.test(file) && commandOfFile(file) === undefined;
}

const read = (dir: string, file: string): string => readFileSync(path.join(dir, file), 'utf8');

/**
 * The command defined by `dir/file` (`dir`: the caller's `__dirname`), composed as asked.
 * Throws when `file` carries no key count, or a prelude does (a misnamed file is a build fault).
 */
export function luaCommand<File extends string>(dir: string, file: File, composition: LuaComposition = {}): LuaCommand<CommandName<File>> {
  const command = commandOfFile(file);
  if (!command) throw new Error(`${file} names no Lua command: a command's file is <kebab-name>-<key count>.lua`);
  const preludes = composition.preludes ?? [];
  for (const prelude of preludes) if (!isPreludeFile(prelude)) throw new Error(`${prelude} is not a prelude: a prelude's file name carries no key count`);
  const lua = (composition.crossSlot ? CROSS_SLOT_FLAG : '') + preludes.map((prelude) => read(dir, prelude)).join('') + read(dir, file);
  return { name: command.name as CommandName<File>, numberOfKeys: command.numberOfKeys, lua };
}

/**
 * Defines `commands` on `client` and returns it typed with them (`Scripts`: the caller's
 * interface of its commands; each command given must be one of its members).
 */
export function defineCommands<Scripts, Client extends RedisClient = RedisClient>(client: Client, commands: ReadonlyArray<LuaCommand<keyof Scripts & string>>): Client & Scripts {
  for (const { name, numberOfKeys, lua } of commands) client.defineCommand(name, { numberOfKeys, lua });
  return client as Client & Scripts;
}
