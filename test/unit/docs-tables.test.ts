/**
 * The docs' reference tables held to the code, so neither drifts from the other:
 * - docs/configuration.md lists every LONGRUN_* variable src/config.ts reads (found by
 *   watching what loadConfig reads), with its default (the documented value, set, gives
 *   the same Config as leaving it unset), and no variable config.ts does not read;
 * - docs/operating.md's metric tables list every metric the gateway's registry exposes,
 *   with its type and labels, and no metric it does not expose;
 * - docs/errors.md lists every error code (src/core/errors.ts) with its HTTP status
 *   (src/http/error-status.ts), whether it is retryable, and its Retry-After;
 * - every relative link of README.md and docs/*.md reaches a file and, with an anchor, a
 *   heading of it; the README's first screen links docs/running-beside-gitlab.md.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, removedVariables } from '../../src/config';
import { errorCatalog, type ErrorCode } from '../../src/core/errors';
import { fromRoot } from '../../src/core/paths';
import { errorStatus, retryAfterOf } from '../../src/http/error-status';
import { GatewayMetrics } from '../../src/gateway-metrics';
import { removeSecretFile, writeSecretFile } from '../../stack/secret';

const doc = (name: string): string => readFileSync(fromRoot('docs', name), 'utf8');

/** The text of a `## heading` section, up to the next `## `. */
function section(text: string, heading: string): string {
  const start = text.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`no section "## ${heading}"`);
  const end = text.indexOf('\n## ', start + 1);
  return text.slice(start, end < 0 ? undefined : end);
}

/** The rows of every markdown table in `text` whose first cell is one backticked name: name → the other cells. */
function rowsByName(text: string, name: RegExp): Map<string, string[]> {
  const rows = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('| ')) continue;
    const cells = line
      .slice(2, line.endsWith(' |') ? -2 : undefined)
      .split(' | ')
      .map((c) => c.trim());
    const m = new RegExp(`^\`(${name.source})\`$`).exec(cells[0] ?? '');
    if (!m) continue;
    if (rows.has(m[1] as string)) throw new Error(`${m[1]} has two rows`);
    rows.set(m[1] as string, cells.slice(1));
  }
  return rows;
}

describe('docs/configuration.md against src/config.ts', () => {
  let secretFile: string;
  let withOwner: Record<string, string>;

  beforeAll(async () => {
    secretFile = await writeSecretFile();
    withOwner = { LONGRUN_OWNER_URL: 'https://owner.example', LONGRUN_SECRET_FILE: secretFile };
  });
  afterAll(async () => {
    await removeSecretFile(secretFile);
  });

  /** Every LONGRUN_* name loadConfig looks up, with and without an owner. */
  function variablesRead(): Set<string> {
    const read = new Set<string>();
    for (const base of [withOwner, {}]) {
      const env = new Proxy({ ...base } as Record<string, string | undefined>, {
        get(target, key) {
          if (typeof key === 'string' && key.startsWith('LONGRUN_')) read.add(key);
          return typeof key === 'string' ? target[key] : undefined;
        },
      });
      loadConfig(env);
    }
    return read;
  }

  const text = doc('configuration.md');
  const table = rowsByName(text.slice(0, text.indexOf('\n## ')), /LONGRUN_[A-Z0-9_]+/);
  const removed = section(text, 'Removed variables');

  it('documents every variable config.ts reads, in the table (or among the removed ones, which are read to be refused), and none it does not', () => {
    const read = variablesRead();
    expect(read.size).toBeGreaterThan(40);
    const removedRead = [...read].filter((name) => name in removedVariables);
    expect(removedRead).toEqual(expect.arrayContaining(['LONGRUN_STOP_REASON_RUN_LIMIT', 'LONGRUN_WATCH_IDLE_MS', 'LONGRUN_MAX_WATCHERS']));
    for (const name of removedRead) expect(removed, `${name} in "Removed variables"`).toContain(`\`${name}\``);
    const live = [...read].filter((name) => !removedRead.includes(name));
    expect([...table.keys()].sort()).toEqual(live.sort());
  });

  it('states each default as config.ts applies it: the documented value, set, changes nothing', () => {
    const base = loadConfig(withOwner);
    const described = /^(unset|empty|required)\b/;
    for (const [name, [defaultCell]] of table) {
      expect(defaultCell, `${name}: a default`).toBeTruthy();
      const literal = /^`([^`]*)`/.exec(defaultCell as string)?.[1];
      if (literal === undefined) {
        expect(defaultCell, `${name}: a default that is no value says unset, empty or required`).toMatch(described);
        continue;
      }
      if (name === 'LONGRUN_OWNER_URL' || name === 'LONGRUN_SECRET_FILE') continue;
      const value = literal.replace('<hostname>-<pid>', `${os.hostname()}-${process.pid}`);
      expect(loadConfig({ ...withOwner, [name]: value }), `${name}=${value} is the default`).toEqual(base);
    }
  });
});

describe("docs/operating.md's metric tables against the registry", () => {
  const tables = section(doc('operating.md'), 'Metrics');
  const documented = rowsByName(tables, /longrun_[a-z0-9_]+/);

  it('list every metric the gateway exposes, with its type and labels, and no other', async () => {
    const metrics = new GatewayMetrics({ defaultMetrics: false });
    const exposed = await metrics.registry.getMetricsAsJSON();
    expect(exposed.length).toBeGreaterThan(40);
    expect([...documented.keys()].sort()).toEqual(exposed.map((m) => m.name).sort());
    for (const m of exposed) {
      const [type, labels] = documented.get(m.name) as string[];
      expect(type, `${m.name}: type`).toBe(m.type);
      const declared = (metrics.registry.getSingleMetric(m.name) as unknown as { labelNames: string[] }).labelNames;
      const listed = labels === '—' ? [] : [...(labels as string).matchAll(/`(\w+)`/g)].map((x) => x[1]);
      expect(listed.sort(), `${m.name}: labels`).toEqual([...declared].sort());
    }
  });
});

describe('docs/errors.md against the error catalogue', () => {
  const documented = rowsByName(
    // The table's first cell is the status: move the code first for rowsByName.
    doc('errors.md')
      .split('\n')
      .map((line) => line.replace(/^\| ([^|]+) \| (`[A-Z_]+`) \|/, '| $2 | $1 |'))
      .join('\n'),
    /[A-Z_]+/,
  );

  it('lists every code with its status, whether it is retryable, and its Retry-After; and no other code', () => {
    const codes = Object.keys(errorCatalog) as ErrorCode[];
    expect([...documented.keys()].sort()).toEqual([...codes].sort());
    for (const code of codes) {
      const [status, retryable, retryAfter] = documented.get(code) as string[];
      // The owner's refusal keeps the owner's status and headers (its own Retry-After among them).
      if (code === 'PREAUTH_DENIED') {
        expect([status, retryAfter]).toEqual(["owner's", "the owner's"]);
      } else {
        expect(status, `${code}: status`).toBe(String(errorStatus[code]));
        const expected = retryAfterOf(code, undefined);
        expect(/^(\d+|—)/.exec(retryAfter as string)?.[1], `${code}: Retry-After`).toBe(expected === undefined ? '—' : String(expected));
      }
      expect(retryable, `${code}: retryable`).toBe(errorCatalog[code].retryable ? 'yes' : 'no');
    }
  });
});

describe('links between the docs', () => {
  /** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
  const slug = (heading: string): string =>
    heading
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replaceAll(' ', '-');
  const anchors = (file: string): Set<string> => new Set([...readFileSync(file, 'utf8').matchAll(/^#+ (.*)$/gm)].map((m) => slug(m[1] as string)));
  const pages = [
    'README.md',
    ...readdirSync(fromRoot('docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];

  it('every relative link reaches a file, and a heading of it when it names one', () => {
    let checked = 0;
    for (const page of pages) {
      for (const [, target] of readFileSync(fromRoot(page), 'utf8').matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target as string)) continue;
        const [file, anchor] = (target as string).split('#');
        const resolved = file ? path.join(path.dirname(fromRoot(page)), file) : fromRoot(page);
        expect(existsSync(resolved), `${page}: ${target}`).toBe(true);
        if (anchor && resolved.endsWith('.md')) expect(anchors(resolved), `${page}: ${target}`).toContain(anchor);
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThan(50);
  });

  it("the README's first screen links docs/running-beside-gitlab.md", () => {
    const firstScreen = readFileSync(fromRoot('README.md'), 'utf8').split('\n').slice(0, 15).join('\n');
    expect(firstScreen).toContain('](docs/running-beside-gitlab.md)');
  });
});
