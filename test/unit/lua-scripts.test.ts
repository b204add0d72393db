/**
 * The one Lua loader (src/redis/scripts.ts) and its naming rule, over every .lua file in src:
 * a command's file name carries its key count (`acquire-lock-2.lua`), which must be the
 * KEYS its header documents and its code reads; a file without one is a prelude, which
 * reads no KEYS of its own. A script renamed with the wrong count, or a prelude loaded as a
 * command, fails here rather than on a live Redis.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { commandOfFile, isPreludeFile, luaCommand, type CommandName } from '../../src/redis/scripts';

const src = path.join(__dirname, '..', '..', 'src');
const coordination = path.join(src, 'coordination');

function luaFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const at = path.join(dir, entry.name);
    if (entry.isDirectory()) return luaFiles(at);
    return entry.name.endsWith('.lua') ? [at] : [];
  });
}

const keysRead = (lua: string): number[] => [...new Set([...lua.matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1])))].sort((a, b) => a - b);

describe('every .lua file in src', () => {
  const files = luaFiles(src);

  it('is found in each folder that calls Redis scripts', () => {
    const folders = new Set(files.map((file) => path.relative(src, path.dirname(file))));
    expect([...folders].sort()).toEqual(['coordination', 'follow', path.join('websocket', 'bridge')]);
  });

  for (const file of files) {
    const name = path.basename(file);
    const lua = readFileSync(file, 'utf8');
    const command = commandOfFile(name);
    if (command) {
      it(`${path.relative(src, file)}: the command ${command.name}, KEYS[1..${command.numberOfKeys}], each in its header`, () => {
        const all = Array.from({ length: command.numberOfKeys }, (_, i) => i + 1);
        expect(keysRead(lua)).toEqual(all);
        for (const i of all) expect(lua, `KEYS[${i}] documented`).toMatch(new RegExp(`^-- KEYS\\[${i}\\] `, 'm'));
        expect(lua).toMatch(/^-- Returns /m);
        expect(isPreludeFile(name)).toBe(false);
      });
    } else {
      it(`${path.relative(src, file)}: a prelude, reading no KEYS of its own`, () => {
        expect(isPreludeFile(name)).toBe(true);
        expect(keysRead(lua)).toEqual([]);
      });
    }
  }
});

describe('luaCommand', () => {
  it('names a command from its file name alone', () => {
    expect(commandOfFile('acquire-lock-2.lua')).toEqual({ name: 'acquireLock', numberOfKeys: 2 });
    expect(commandOfFile('write-run-record-1.lua')).toEqual({ name: 'writeRunRecord', numberOfKeys: 1 });
    expect(commandOfFile('store-fence.lua')).toBeUndefined();
    expect(commandOfFile('acquire-lock-2.js')).toBeUndefined();
    expectTypeOf<CommandName<'acquire-lock-2.lua'>>().toEqualTypeOf<'acquireLock'>();
    expectTypeOf<CommandName<'write-run-record-1.lua'>>().toEqualTypeOf<'writeRunRecord'>();
    expectTypeOf<CommandName<'store-fence.lua'>>().toBeNever();
  });

  it('composes the Cluster flag line first, then the preludes, then the script', () => {
    const read = (file: string): string => readFileSync(path.join(coordination, file), 'utf8');
    const fenced = luaCommand(coordination, 'acquire-lock-2.lua', { crossSlot: true, preludes: ['store-fence.lua'] });
    expect(fenced).toEqual({ name: 'acquireLock', numberOfKeys: 2, lua: '#!lua flags=allow-cross-slot-keys\n' + read('store-fence.lua') + read('acquire-lock-2.lua') });
    expect(luaCommand(coordination, 'acquire-lock-2.lua', { crossSlot: false, preludes: ['store-fence.lua'] }).lua).toBe(read('store-fence.lua') + read('acquire-lock-2.lua'));
    expect(luaCommand(coordination, 'request-stop-2.lua').lua).toBe(read('request-stop-2.lua'));
  });

  it('refuses a prelude as a command and a command as a prelude', () => {
    expect(() => luaCommand(coordination, 'store-fence.lua')).toThrow(/names no Lua command/);
    expect(() => luaCommand(coordination, 'request-stop-2.lua', { preludes: ['acquire-lock-2.lua'] })).toThrow(/is not a prelude/);
  });
});
