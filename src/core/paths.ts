import { existsSync } from 'node:fs';
import path from 'node:path';

/**
 * The package root (the folder holding package.json), found from this file so the same
 * code works from src/ under vitest and from dist/src/ after a build.
 */
function findPackageRoot(start: string): string {
  let dir = start;
  for (;;) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`package.json not found above ${start}`);
    dir = parent;
  }
}

const packageRoot = findPackageRoot(__dirname);

export function fromRoot(...segments: string[]): string {
  return path.join(packageRoot, ...segments);
}
