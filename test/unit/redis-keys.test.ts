/**
 * The key names a renewal script builds from a workflow id (renew-leases.lua, from
 * `parts`) are the names every other command uses, in both key schemes.
 */
import { describe, expect, it } from 'vitest';
import { clusterKeys, workhorseKeys } from '../../src/coordination/keys';

describe('key parts', () => {
  for (const keys of [workhorseKeys, clusterKeys]) {
    it(`${keys.scheme}: prefix + id + suffix is the key`, () => {
      for (const id of ['1', '4242', 'a-b_c', 'has}brace', '{tag}', '']) {
        for (const kind of ['lock', 'stop', 'run'] as const) {
          const [prefix, suffix] = keys.parts[kind];
          expect(prefix + id + suffix, `${kind} of ${JSON.stringify(id)}`).toBe(keys[kind](id));
        }
      }
    });
  }
});
