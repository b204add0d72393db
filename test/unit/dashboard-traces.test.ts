/**
 * The Grafana dashboard's ways from a metric to traces (docs/operating.md "From the
 * dashboard to a trace"): each link opens Explore on the `traces` data-source variable with
 * a TraceQL search over the dashboard's time range, for service.name longrun (the
 * OTEL_SERVICE_NAME default) and, on the latency panels, span names the gateway makes.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseTracingConfig } from '../../src/observability/tracing-config';
import { routeNames } from '../../src/observability/tracing';

interface Link {
  title: string;
  url: string;
}
interface Panel {
  title?: string;
  fieldConfig?: { defaults?: { links?: Link[] } };
}
const dashboard = JSON.parse(readFileSync(path.resolve(__dirname, '../../deploy/grafana/longrun-dashboard.json'), 'utf8')) as {
  links?: Link[];
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string; query: string }> };
};

/** The TraceQL query and data source of an Explore link. */
function explored(url: string): { datasource: string; query: string; range: unknown } {
  expect(url.startsWith('/explore?')).toBe(true);
  const panes = JSON.parse(new URLSearchParams(url.slice('/explore?'.length)).get('panes') ?? 'null') as Record<
    string,
    { datasource: string; queries: Array<{ query: string; queryType: string }>; range: unknown }
  >;
  const [pane] = Object.values(panes);
  expect(pane?.queries[0]?.queryType).toBe('traceql');
  return { datasource: pane?.datasource ?? '', query: pane?.queries[0]?.query ?? '', range: pane?.range };
}

const panelLinks = (title: string): Link[] => dashboard.panels.find((p) => p.title === title)?.fieldConfig?.defaults?.links ?? [];

describe('the dashboard links traces', () => {
  it('has a Tempo data-source variable the links search', () => {
    expect(dashboard.templating.list.find((v) => v.name === 'traces')).toMatchObject({ type: 'datasource', query: 'tempo' });
  });

  it('links the service’s traces over the dashboard’s time range', () => {
    const [link] = dashboard.links ?? [];
    const { datasource, query, range } = explored(link?.url ?? '');
    expect(datasource).toBe('${traces}');
    expect(range).toEqual({ from: '${__from}', to: '${__to}' });
    const service = parseTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }, (variable) => {
      throw new Error(variable);
    });
    expect(service.enabled && service.serviceName).toBe('longrun');
    expect(query).toBe('{resource.service.name="longrun"}');
  });

  it('the latency panels search slow spans by names the gateway gives them', () => {
    const names = (title: string): string[] => panelLinks(title).flatMap((l) => [...explored(l.url).query.matchAll(/(?<![.\w])name="([^"]+)"/g)].map((m) => m[1] as string));
    expect(names('Detached accept latency')).toEqual([routeNames.execute]);
    // OwnerClient's relay span: `owner ${kind}` (tracing.ts ownerCall).
    expect(names('HTTP relay latency')).toEqual(['owner relay']);
  });
});
