/**
 * The alert rules (deploy/prometheus/longrun-rules.yml): `promtool check rules` passes;
 * `promtool test rules` passes the unit tests in longrun-rules.test.yml, which hold, for
 * every alert, a case where it fires and one where it stays quiet; every metric and
 * label value the rules (and the Grafana dashboard) select is one a running gateway
 * exports on /metrics (except the metrics proposed for the gateway, listed below, which
 * it must not export yet); every alert has a runbook line in docs/operating.md.
 * promtool is optional outside CI.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxmemoryPolicies } from '../../src/coordination/eviction-check';
import { fromRoot } from '../../src/core/paths';
import { baseResources, containerEnv, findResource, gatewayContainer, readYaml, type Deployment } from '../helpers/deploy';
import { findBinary, parseExposition, skipReason, type Sample } from '../helpers/prometheus';
import { startStack, type Stack } from '../../stack';

const RULES = fromRoot('deploy/prometheus/longrun-rules.yml');
const RULE_TESTS = fromRoot('deploy/prometheus/longrun-rules.test.yml');

/**
 * Metrics the rules use that the gateway does not export yet: proposed in
 * docs/operating.md ("Alerts"). When one is added to a part's metrics.ts, remove it here.
 */
/** Metrics the rules use that the gateway does not export yet (none today). */
const PROPOSED: string[] = [];
/** Series Prometheus makes itself, and labels the scrape adds (not in /metrics). */
const SYNTHETIC = ['up'];
const TARGET_LABELS = ['job', 'instance', 'namespace', 'pod', 'service', 'container', 'endpoint'];
/**
 * Every value a label can take, for labels a rule matches negatively (`!=`, `!~`): what it
 * excludes need not be exported by this gateway now, but must be a value some gateway can export.
 */
const LABEL_VALUES: Record<string, readonly string[]> = { policy: [...maxmemoryPolicies, 'other', 'unknown'] };

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  annotations?: Record<string, string>;
}
interface RuleTest {
  alert_rule_test?: Array<{ alertname: string; exp_alerts: unknown[] }>;
}

const rules = readYaml<{ groups: Array<{ name: string; rules: Rule[] }> }>(RULES).groups.flatMap((g) => g.rules);
const alerts = rules.filter((r) => r.alert !== undefined);
const tests = readYaml<{ tests: RuleTest[] }>(RULE_TESTS).tests.flatMap((t) => t.alert_rule_test ?? []);

/** Every `name{matchers}` selector of a PromQL expression. */
function selectors(expr: string): Array<{ name: string; matchers: Array<{ label: string; op: string; value: string }> }> {
  return [...expr.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}/g)].map((m) => ({
    name: m[1] as string,
    matchers: [...(m[2] as string).matchAll(/(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"/g)].map((x) => ({ label: x[1] as string, op: x[2] as string, value: x[3] as string })),
  }));
}

const promtool = findBinary('promtool');

function runPromtool(args: string[]): { status: number | null; output: string } {
  const result = spawnSync(promtool as string, args, { encoding: 'utf8', timeout: 60_000 });
  if (result.error) throw result.error;
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe('promtool', () => {
  const skip = skipReason('promtool', promtool);

  it('`promtool check rules` accepts every rule', (ctx) => {
    if (skip) {
      console.warn(`SKIPPED promtool check rules: ${skip}`);
      ctx.skip(skip);
      return;
    }
    expect(promtool, 'promtool is required in CI').toBeDefined();
    const result = runPromtool(['check', 'rules', RULES]);
    expect(result.output).toContain(`SUCCESS: ${rules.length} rules found`);
    expect(result.status).toBe(0);
  });

  it('`promtool test rules`: every alert fires and stays quiet when its unit tests say', (ctx) => {
    if (skip) {
      console.warn(`SKIPPED promtool test rules: ${skip}`);
      ctx.skip(skip);
      return;
    }
    const result = runPromtool(['test', 'rules', RULE_TESTS]);
    expect(result.output).toContain('SUCCESS');
    expect(result.status, result.output).toBe(0);
  }, 60_000);
});

describe('the rule unit tests', () => {
  it('hold, for every alert, a case where it fires and one where it stays quiet', () => {
    expect(alerts.length).toBeGreaterThanOrEqual(8);
    for (const { alert } of alerts) {
      const cases = tests.filter((t) => t.alertname === alert);
      expect(
        cases.some((t) => t.exp_alerts.length > 0),
        `${alert} fires somewhere`,
      ).toBe(true);
      expect(
        cases.some((t) => t.exp_alerts.length === 0),
        `${alert} stays quiet somewhere`,
      ).toBe(true);
    }
    const names = new Set(alerts.map((a) => a.alert));
    for (const t of tests) expect(names, `test for unknown alert ${t.alertname}`).toContain(t.alertname);
  });
});

describe('the rules against what the gateway exports', () => {
  let stack: Stack;
  let samples: Sample[];
  let types: Map<string, string>;

  beforeAll(async () => {
    // Beside a Redis: what the gateway says of its lock store is exported only then.
    stack = await startStack({ redis: 'own' });
    ({ samples, types } = parseExposition(await stack.metrics()));
  });

  afterAll(async () => {
    await stack?.close();
  });

  it('select only exported metrics and label values, each on job="longrun"', () => {
    const used = rules.flatMap((r) => selectors(r.expr));
    expect(used.length).toBeGreaterThan(15);
    for (const { name, matchers } of used) {
      expect(matchers, `${name} selects job="longrun"`).toContainEqual({ label: 'job', op: '=', value: 'longrun' });
      if (SYNTHETIC.includes(name) || PROPOSED.includes(name)) continue;
      const series = samples.filter((s) => s.name === name);
      expect(series.length, `${name} is exported`).toBeGreaterThan(0);
      for (const { label, op, value } of matchers) {
        if (TARGET_LABELS.includes(label)) continue;
        if (op.startsWith('!') && LABEL_VALUES[label]) {
          for (const alternative of op === '!~' ? value.split('|') : [value]) expect(LABEL_VALUES[label], `${name}{${label}${op}"${value}"}`).toContain(alternative);
          continue;
        }
        expect(op, `${name}{${label}${op}"${value}"}`).toMatch(/^=~?$/);
        for (const alternative of op === '=~' ? value.split('|') : [value]) {
          expect(
            series.some((s) => s.labels[label] === alternative),
            `${name}{${label}="${alternative}"} is exported`,
          ).toBe(true);
        }
      }
    }
    // A metric used without a selector would escape the check above.
    const bare = rules.flatMap((r) => r.expr.replace(/[a-zA-Z_:][a-zA-Z0-9_:]*\s*\{[^}]*\}/g, '').match(/\blongrun_[a-z0-9_]+/g) ?? []);
    expect(bare).toEqual([]);
  });

  it('the Grafana dashboard selects only exported metrics and label values too', () => {
    const dashboard = JSON.parse(readFileSync(fromRoot('deploy/grafana/longrun-dashboard.json'), 'utf8')) as { panels: Array<{ targets?: Array<{ expr: string }> }> };
    const used = dashboard.panels.flatMap((p) => p.targets ?? []).flatMap((t) => selectors(t.expr));
    expect(used.length).toBeGreaterThan(15);
    // A family with no series yet (e.g. session errors before the first one) is still declared.
    const family = (name: string): string | undefined => [name, name.replace(/_(bucket|count|sum)$/, '')].find((n) => types.has(n));
    for (const { name, matchers } of used) {
      expect(family(name), `${name} is exported`).toBeDefined();
      const series = samples.filter((s) => s.name === name);
      for (const { label, op, value } of matchers) {
        if (TARGET_LABELS.includes(label)) continue;
        for (const alternative of op === '=~' ? value.split('|') : [value]) {
          expect(
            series.some((s) => s.labels[label] === alternative),
            `${name}{${label}="${alternative}"} is exported`,
          ).toBe(true);
        }
      }
    }
  });

  it('the proposed metrics are not exported yet, and docs/operating.md proposes them', () => {
    const operating = readFileSync(fromRoot('docs/operating.md'), 'utf8');
    for (const name of PROPOSED) {
      expect(
        samples.some((s) => s.name === name),
        `${name} is exported now: remove it from PROPOSED and from the proposal in docs/operating.md`,
      ).toBe(false);
      expect(operating).toMatch(new RegExp(`\`${name}\`.*proposed|proposed.*\`${name}\``, 'i'));
    }
  });

  it("the cap constant of longrun:max_detached_runs is the Deployment's LONGRUN_MAX_DETACHED_RUNS", () => {
    const deployment = findResource<Deployment>(
      baseResources().map((r) => r.resource),
      'Deployment',
    );
    const cap = containerEnv(gatewayContainer(deployment).env)['LONGRUN_MAX_DETACHED_RUNS'];
    const record = rules.find((r) => r.record === 'longrun:max_detached_runs');
    expect(record?.expr).toMatch(new RegExp(`\\* ${cap}\\s*$`));
  });
});

describe('runbooks', () => {
  const operating = readFileSync(fromRoot('docs/operating.md'), 'utf8');
  const section = /^## Alerts\n([\s\S]*?)(?=^## )/m.exec(operating)?.[1] ?? '';

  it('every alert has a runbook line in docs/operating.md, and its runbook_url is an absolute URL of that page', () => {
    expect(section.length).toBeGreaterThan(0);
    const pages = new Set<string>();
    for (const { alert, annotations } of alerts) {
      expect(section, `runbook line for ${alert}`).toMatch(new RegExp(`^\\| \`${alert}\` \\|.*\\|.*\\S.*\\|$`, 'm'));
      const url = new URL(annotations?.['runbook_url'] as string);
      expect(url.protocol).toBe('https:');
      expect(url.pathname.endsWith('/docs/operating.md') && url.hash === '#alerts', url.href).toBe(true);
      pages.add(url.href.replace(/#.*$/, ''));
    }
    // One page for every alert: the one an overlay's longrun/runbook-page annotation moves.
    expect(pages.size).toBe(1);
    const documented = [...section.matchAll(/^\| `(\w+)` \|/gm)].map((m) => m[1]);
    expect(documented.sort()).toEqual(alerts.map((a) => a.alert).sort());
  });
});
