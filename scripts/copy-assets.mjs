// What the built gateway reads at run time, copied into dist/ beside the code that reads it,
// so dist/ (with node_modules) is all a deployment needs: the Lua scripts next to their
// modules (every .lua under src/, wherever it sits: src/redis/scripts.ts states the rule
// and loads them from beside their callers), the sandbox's chat page, the contract proto, package.json (the version, and
// the package root the code finds its files from), and the image's `longrun` executable
// (bin/longrun, its mode kept).
import { cpSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const dist = path.join(root, 'dist');

function copyMatching(dir, test) {
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const from = path.join(dir, entry.name);
    if (entry.isDirectory()) copyMatching(from, test);
    else if (test(entry.name)) {
      mkdirSync(path.join(dist, dir), { recursive: true });
      cpSync(path.join(root, from), path.join(dist, from));
    }
  }
}

copyMatching('src', (name) => name.endsWith('.lua'));
copyMatching('sandbox', (name) => name.endsWith('.html'));
cpSync(path.join(root, 'proto'), path.join(dist, 'proto'), { recursive: true });
cpSync(path.join(root, 'package.json'), path.join(dist, 'package.json'));
cpSync(path.join(root, 'bin'), path.join(dist, 'bin'), { recursive: true });
