/** What the measured build's Lua scripts run inside Redis, which INFO commandstats counts beside the EVALSHA that ran them. */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The commands the build's scripts call (lower case, as INFO commandstats names them), read
 * from its src/<dir>/*.lua for each of `dirs` it has; `mainJs` is the build's dist/src/main.js.
 */
export function scriptCommands(mainJs: string, dirs: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const sub of dirs) {
    const dir = path.join(path.dirname(mainJs), '..', '..', 'src', sub);
    // A build from before the bridge has no src/bridge.
    if (!existsSync(dir)) continue;
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.lua'))) {
      for (const match of readFileSync(path.join(dir, file), 'utf8').matchAll(/redis\.call\(\s*'([A-Za-z]+)'/g)) names.add((match[1] as string).toLowerCase());
    }
  }
  return names;
}
