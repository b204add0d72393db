/**
 * What a fresh sandbox gateway's /metrics says, pinned byte for byte (test/fixtures/metrics-fresh.prom):
 * every longrun_* family's HELP and TYPE lines, and every series it starts with — label names,
 * label values, buckets and the zeros dashboards divide by. The families are declared by the
 * parts that own them (each `<part>/metrics.ts`); moving one must change none of this.
 * docs-tables.test.ts holds the names, types and labels to docs/operating.md; this holds the rest.
 *
 * Families are compared in name order and each family's series sorted: the order prom-client
 * writes them in follows registration and carries no meaning. The version label of
 * longrun_build_info is written `<version>`. A change made on purpose is written back with
 * UPDATE_METRICS_FIXTURE=1 (and reviewed in the diff).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { fromRoot } from '../../src/core/paths';
import { version } from '../../src/core/version';
import { Gateway } from '../../src/gateway';
import { startSandbox, type Sandbox } from '../../sandbox/sandbox';

const FIXTURE = fromRoot('test', 'fixtures', 'metrics-fresh.prom');

let sandbox: Sandbox;
let gateway: Gateway;

beforeAll(async () => {
  sandbox = await startSandbox(loadConfig({ LONGRUN_LISTEN: '127.0.0.1:0', LONGRUN_OPS_LISTEN: '127.0.0.1:0', LONGRUN_LOG_LEVEL: 'silent' }));
  gateway = await Gateway.start(sandbox.config, { logger: createLogger('silent'), sandboxRoutes: sandbox.routes });
});

afterAll(async () => {
  await gateway?.close();
  await sandbox?.close();
});

/** The longrun_* families of a Prometheus text, by name, each its HELP and TYPE lines then its series sorted. */
function families(text: string): string {
  const byName = new Map<string, { head: string[]; series: string[] }>();
  for (const line of text.split('\n')) {
    const name = /^# (?:HELP|TYPE) (\S+)/.exec(line)?.[1] ?? /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line)?.[1];
    if (name === undefined || !name.startsWith('longrun_')) continue;
    const family = [...byName.keys()].find((f) => name === f || (name.startsWith(`${f}_`) && /_(bucket|sum|count)$/.test(name))) ?? name;
    const entry = byName.get(family) ?? { head: [], series: [] };
    byName.set(family, entry);
    if (line.startsWith('#')) entry.head.push(line);
    else entry.series.push(line.replace(`version="${version}"`, 'version="<version>"'));
  }
  return [...byName.keys()]
    .sort()
    .map((name) => {
      const { head, series } = byName.get(name) as { head: string[]; series: string[] };
      return [...head, ...series.sort()].join('\n');
    })
    .join('\n\n')
    .concat('\n');
}

it('a fresh gateway exposes the pinned families, help texts, labels and zero series', async () => {
  const res = await request(`${gateway.opsUrl}/metrics`);
  expect(res.statusCode).toBe(200);
  const exposed = families(await res.body.text());
  if (process.env['UPDATE_METRICS_FIXTURE'] === '1') writeFileSync(FIXTURE, exposed);
  expect(exposed.split('\n\n').length).toBeGreaterThan(50);
  expect(exposed).toBe(readFileSync(FIXTURE, 'utf8'));
});
