/**
 * A real Prometheus server scrapes the gateway's ops listener (docs/spec.md §7): `up` is 1, a
 * run counter has the value the runs produced, and every query of the Grafana dashboard
 * under deploy/ is valid PromQL that Prometheus evaluates. Skipped with a message when
 * `prometheus` is not installed, outside CI only.
 */
import { readFileSync } from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { fromRoot } from '../../src/core/paths';
import { findBinary, skipReason, startPrometheus, type PrometheusServer } from '../helpers/prometheus';
import { startStack, type Stack } from '../../stack';

let stack: Stack | undefined;
let prometheus: PrometheusServer | undefined;

afterEach(async () => {
  await prometheus?.stop();
  prometheus = undefined;
  await stack?.close();
  stack = undefined;
});

const binary = findBinary('prometheus');

it('Prometheus scrapes the ops listener: up == 1 and the run counters have their values', async (ctx) => {
  const skip = skipReason('prometheus', binary);
  if (skip) {
    console.warn(`SKIPPED Prometheus scrape test: ${skip}`);
    ctx.skip(skip);
    return;
  }
  expect(binary, 'prometheus is required in CI').toBeDefined();
  stack = await startStack({ preauth: { detached: true } });
  for (const id of ['prom-1', 'prom-2']) {
    const res = await stack.executeText(id, { steps: [{ op: 'checkpoint', text: 'x' }, { op: 'end' }] });
    expect(res.status).toBe(202);
  }
  await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 2, 5_000, 'both runs ended');

  const target = new URL(stack.opsUrl).host;
  prometheus = await startPrometheus(binary as string, target);
  const server = prometheus;
  const single = async (expr: string): Promise<string | undefined> => (await server.query(expr))[0]?.value[1];

  // Prometheus applies new scrape targets every 5 s, then scrapes every second.
  await server.waitUntil('up == 1', async () => (await single(`up{job="longrun",instance="${target}"} == 1`)) === '1', 20_000);
  await server.waitUntil('the teardown counter', async () => (await single('longrun_teardowns_total{transport="detached",reason="finished"}')) === '2', 5_000);
  expect(await single('longrun_connections_total{transport="detached"}')).toBe('2');
  expect(await single('longrun_callbacks_total{result="ok"}')).toBe('2');
  expect(await single('longrun_runs_in_flight{transport="detached"}')).toBe('0');
  // The scrape was clean: no samples dropped for bad names or duplicate series.
  expect(await single(`scrape_samples_scraped{instance="${target}"} > 100`)).toBeDefined();

  const dashboard = JSON.parse(readFileSync(fromRoot('deploy/grafana/longrun-dashboard.json'), 'utf8')) as {
    panels: Array<{ title: string; targets?: Array<{ expr: string }> }>;
  };
  for (const panel of dashboard.panels) {
    for (const target of panel.targets ?? []) {
      const expr = target.expr.replaceAll('$__rate_interval', '1m').replaceAll('$job', '.+').replaceAll('$instance', '.+');
      await expect(server.query(expr), `panel "${panel.title}": ${expr}`).resolves.toBeInstanceOf(Array);
    }
  }
  // The dashboard's selectors match what is scraped.
  expect(await single('sum(longrun_runs_in_flight{job=~".+", instance=~".+"})')).toBe('0');
}, 60_000);
