/**
 * The Kubernetes manifests (deploy/kubernetes): every resource validates against the
 * Kubernetes and Prometheus Operator schemas (kubernetes-models), the Deployment's
 * environment parses with src/config.ts and every LONGRUN_* name in it is one that
 * config.ts reads, its ports are the ones the listeners bind, its probes are routes of
 * the ops app that behave as a drain needs, the grace period covers the drain, the
 * memory limit covers BENCHMARKS.md's bytes per run and per WebSocket session at the
 * configured caps plus the parked runs' backlog budget (docs/deploying.md "Sizing"), the
 * selectors of Services, PDB, HPA, ServiceMonitor and NetworkPolicy pick the gateway's pods,
 * and its egress admits what the gateway calls and nothing private beyond. With kubectl
 * installed, `kubectl kustomize` renders the base (its caps checked again as rendered), the
 * Sentinel overlay, and an overlay that moves the alert runbooks.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type EnvConfig } from '../../src/config';
import { ConfigError } from '../../src/core/env';
import { GatewayMetrics } from '../../src/gateway-metrics';
import { createOpsApp } from '../../src/http/ops-app';
import { Metrics } from '../../src/observability/metrics';
import { fromRoot } from '../../src/core/paths';
import { RunRegistry } from '../../src/run/registry';
import { version } from '../../src/core/version';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Deployment as DeploymentModel } from 'kubernetes-models/apps/v1/Deployment';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import {
  BASE_DIR,
  SAMPLE_POD_NAME,
  SENTINEL_DIR,
  baseResources,
  containerEnv,
  findKubectl,
  findResource,
  gatewayContainer,
  kustomize,
  memoryBytes,
  mergeEnv,
  parseDockerfile,
  readYaml,
  type Container,
  type Deployment,
  type EnvVar,
  type Kustomization,
  type Resource,
} from '../helpers/deploy';
import { removeSecretFile, writeSecretFile } from '../../stack/secret';

/** A model class of kubernetes-models: constructed from an object, validate() throws. */
type Model = new (data: never) => { apiVersion: string; kind: string; validate(): void };

/** The schema for each apiVersion/kind the manifests may use. */
const schemas: Record<string, Model> = {
  'apps/v1/Deployment': DeploymentModel as unknown as Model,
  'v1/Service': Service as unknown as Model,
  'v1/ServiceAccount': ServiceAccount as unknown as Model,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget as unknown as Model,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler as unknown as Model,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy as unknown as Model,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor as unknown as Model,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule as unknown as Model,
};

function validate(resource: Resource): void {
  const Schema = schemas[`${resource.apiVersion}/${resource.kind}`];
  if (!Schema) throw new Error(`no schema for ${resource.apiVersion} ${resource.kind}`);
  const model = new Schema(resource as never);
  // The model's own apiVersion/kind: a typo there is not silently re-typed.
  expect(`${model.apiVersion}/${model.kind}`).toBe(`${resource.apiVersion}/${resource.kind}`);
  model.validate();
}

/** RSS of an idle gateway (node dist/src/main.js, Node 20, VmRSS after start), MiB. */
const IDLE_RSS_MIB = 90;
/** Memory limit over the benchmark's need: V8 heap slack, blocking runs, bursts. */
const MEMORY_HEADROOM = 2;
const MIB = 1024 ** 2;

/** BENCHMARKS.md's figures the sizing rests on (docs/deploying.md "Sizing"). */
function benchFigures(): { perRunKiB: number; perSessionKiB: number; benchRuns: number; benchDrainMs: number } {
  const bench = readFileSync(fromRoot('BENCHMARKS.md'), 'utf8');
  // The worst RSS per run of any capacity pass, right after a burst of executes (not the settled figure).
  const perRunKiB = Number(/sizing keeps (\d+(?:\.\d+)?) KiB RSS per run/.exec(bench)?.[1]);
  // A WebSocket session held, and one parked (its socket gone, its backlog empty): the larger.
  const held = Number(/^\| held, settled: RSS per session[^|]*\| (\d+(?:\.\d+)?) KiB/m.exec(bench)?.[1]);
  const parked = Number(/^\| \*\*parked: RSS \/ heap per parked session\*\* \| \*\*(\d+(?:\.\d+)?) KiB/m.exec(bench)?.[1]);
  const drain = /^\| drain \| ([\d ]+) runs: exit 0 after ([\d ]+) ms/m.exec(bench);
  return {
    perRunKiB,
    perSessionKiB: Math.max(held, parked),
    benchRuns: Number(drain?.[1]?.replaceAll(' ', '')),
    benchDrainMs: Number(drain?.[2]?.replaceAll(' ', '')),
  };
}

/**
 * The pod's memory at its caps, as docs/deploying.md "Sizing" adds it up: an idle gateway,
 * every detached run, every WebSocket session, the parked runs' backlog budget; times the
 * headroom. Throws (an expect) when the Deployment's limit or heap ceiling does not hold it.
 */
function checkSizing(d: Deployment): { neededBytes: number; limit: number } {
  const c = gatewayContainer(d);
  const sized = loadConfig({ ...containerEnv(c.env), LONGRUN_SECRET_FILE: secretFile });
  const { perRunKiB, perSessionKiB, benchRuns, benchDrainMs } = benchFigures();
  expect(perRunKiB).toBeGreaterThan(0);
  expect(perSessionKiB).toBeGreaterThan(0);
  expect(benchRuns).toBeGreaterThan(0);
  const runsBytes = sized.run.maxDetachedRuns * perRunKiB * 1024;
  const sessionsBytes = sized.websocket.maxSessions * perSessionKiB * 1024;
  expect(sized.run.maxDetachedRuns).toBeGreaterThan(0);
  expect(sized.websocket.maxSessions, 'LONGRUN_MAX_WS_SESSIONS is set, not left to its default').toBe(Number(containerEnv(c.env)['LONGRUN_MAX_WS_SESSIONS']));
  expect(sized.websocket.backlogBudgetBytes, 'LONGRUN_WS_BACKLOG_BUDGET_BYTES is set').toBe(Number(containerEnv(c.env)['LONGRUN_WS_BACKLOG_BUDGET_BYTES']));
  // One parked run's backlog fits the budget: the per-run bound is not the one that bites first everywhere.
  expect(sized.websocket.backlogBudgetBytes).toBeGreaterThanOrEqual(sized.websocket.backlogBytes);
  const neededBytes = MEMORY_HEADROOM * (IDLE_RSS_MIB * MIB + runsBytes + sessionsBytes + sized.websocket.backlogBudgetBytes);
  const limit = memoryBytes(c.resources?.limits?.['memory'] as string);
  expect(limit, 'memory limit ≥ 2 × (idle + runs + sessions + backlog budget)').toBeGreaterThanOrEqual(neededBytes);
  expect(limit, 'more than twice the need wastes nodes').toBeLessThan(2 * neededBytes);
  expect(c.resources?.requests?.['memory'], 'memory request = limit: never evicted for overcommit').toBe(c.resources?.limits?.['memory']);
  expect(c.resources?.limits?.['cpu'], 'a CPU limit throttles the drain').toBeUndefined();
  // V8's old-generation ceiling: above the live heap at full caps (RSS figures bound it), and
  // with the backlogs (Buffers, outside the heap) and an idle gateway still under the limit.
  const oldSpaceBytes = Number(/--max-old-space-size=(\d+)/.exec(containerEnv(c.env)['NODE_OPTIONS'] ?? '')?.[1]) * MIB;
  expect(oldSpaceBytes).toBeGreaterThan(runsBytes + sessionsBytes);
  expect(oldSpaceBytes + sized.websocket.backlogBudgetBytes + IDLE_RSS_MIB * MIB).toBeLessThan(limit);
  // The benchmark's drain, scaled to a full pod, fits the drain budget.
  expect((benchDrainMs * sized.run.maxDetachedRuns) / benchRuns).toBeLessThan(sized.drain.timeoutMs);
  return { neededBytes, limit };
}
/** Seconds the grace period must leave after the drain budget for close and exit. */
const MIN_EXIT_MARGIN_S = 2;

const resources = baseResources().map((r) => r.resource);
const deployment = findResource<Deployment>(resources, 'Deployment', 'longrun');
const container = gatewayContainer(deployment);
const podSpec = deployment.spec.template.spec;
const podLabels = deployment.spec.template.metadata.labels;
const env = containerEnv(container.env);

const selects = (selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean =>
  selector !== undefined && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);

function namedPort(c: Container, name: string | number): number {
  if (typeof name === 'number') return name;
  const port = c.ports?.find((p) => p.name === name);
  if (!port) throw new Error(`no container port named ${name}`);
  return port.containerPort;
}

const overlay = readYaml<Kustomization>(path.join(SENTINEL_DIR, 'kustomization.yaml'));
const patch = readYaml<Deployment>(path.join(SENTINEL_DIR, overlay.patches?.[0]?.path as string));
const patchEnv = gatewayContainer(patch).env as EnvVar[];
/** The overlay's environment: the base's, with the patch's entries merged by name. */
const merged = containerEnv(mergeEnv(container.env as EnvVar[], patchEnv));

let secretFile: string;
let config: EnvConfig;

beforeAll(async () => {
  secretFile = await writeSecretFile();
  config = loadConfig({ ...env, LONGRUN_SECRET_FILE: secretFile });
});

afterAll(async () => {
  await removeSecretFile(secretFile);
});

describe('the kustomize base', () => {
  it('lists every manifest of its directory, and only those', () => {
    const kustomization = readYaml<Kustomization>(path.join(BASE_DIR, 'kustomization.yaml'));
    const files = readdirSync(BASE_DIR).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml');
    expect([...kustomization.resources].sort()).toEqual(files.sort());
    expect(resources.map((r) => r.kind).sort()).toEqual(
      ['Deployment', 'HorizontalPodAutoscaler', 'NetworkPolicy', 'PodDisruptionBudget', 'PrometheusRule', 'Service', 'Service', 'ServiceAccount', 'ServiceMonitor'].sort(),
    );
  });

  it('every resource validates against the Kubernetes and Prometheus Operator schemas', () => {
    for (const resource of resources) expect(() => validate(resource), `${resource.kind} ${resource.metadata.name}`).not.toThrow();
  });

  it('the schemas reject what the API server would (the validation is live)', () => {
    const clone = <T>(value: T): T => structuredClone(value);
    const badPort = clone(deployment);
    (gatewayContainer(badPort).ports as Array<{ containerPort: unknown }>)[0]!.containerPort = '8181';
    expect(() => validate(badPort)).toThrow(/containerPort must be integer/);
    const badService = clone(findResource(resources, 'Service', 'longrun-ops'));
    (badService.spec as { type: string }).type = 'Public';
    expect(() => validate(badService)).toThrow(/type must be equal to one of the allowed values/);
    const badMonitor = clone(findResource(resources, 'ServiceMonitor'));
    (badMonitor.spec as { endpoints: Array<{ interval: string }> }).endpoints[0]!.interval = '15 seconds';
    expect(() => validate(badMonitor)).toThrow(/interval must match pattern/);
    expect(() => validate({ ...clone(deployment), apiVersion: 'apps/v1beta1' })).toThrow(/no schema/);
  });

  it('the PrometheusRule carries exactly the groups of deploy/prometheus/longrun-rules.yml', () => {
    const rules = readYaml<{ groups: unknown[] }>(fromRoot('deploy/prometheus/longrun-rules.yml'));
    const rule = findResource(resources, 'PrometheusRule', 'longrun');
    expect((rule.spec as { groups: unknown[] }).groups, 'run `node scripts/render-prometheusrule.mjs`').toEqual(rules.groups);
  });

  it('deploys the version this tree builds', () => {
    const kustomization = readYaml<Kustomization>(path.join(BASE_DIR, 'kustomization.yaml'));
    expect(kustomization.images?.find((i) => i.name === container.image)?.newTag).toBe(version);
  });
});

describe('the Deployment against src/config.ts', () => {
  it('every LONGRUN_* variable it sets is one that src/config.ts reads', () => {
    const names = Object.keys(env).filter((n) => n.startsWith('LONGRUN_'));
    expect(names.length).toBeGreaterThanOrEqual(10);
    for (const name of names) {
      let error: unknown;
      try {
        loadConfig({ ...env, LONGRUN_SECRET_FILE: secretFile, [name]: 'not valid ::' });
      } catch (err) {
        error = err;
      }
      expect(error, `${name} is not read by loadConfig (renamed?)`).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).variable).toBe(name);
    }
  });

  it('its values parse into what a pod needs: all-interfaces listeners, an owner, a Redis, the pod as replica id', () => {
    expect(config.http.listen.host).toMatch(/^(0\.0\.0\.0|::)$/);
    expect(config.http.opsListen.host).toMatch(/^(0\.0\.0\.0|::)$/);
    // Users' tokens go to the owner on every relayed call: over TLS.
    expect(config.owner.url?.protocol).toBe('https:');
    expect(config.sandbox).toBe(false);
    expect(config.owner.secret).toHaveLength(32);
    expect(config.replicaId).toBe(SAMPLE_POD_NAME);
    expect(config.logLevel).toBe('info');
    // The HPA keeps several replicas: they must share a lock store.
    const hpa = findResource(resources, 'HorizontalPodAutoscaler');
    expect((hpa.spec as { minReplicas: number }).minReplicas).toBeGreaterThan(1);
    expect(config.redis.target?.mode).toBe('standalone');
    expect(env['LONGRUN_REDIS_URL']).toMatch(/^rediss?:\/\//);
    expect(deployment.spec.replicas, 'the HPA owns the replica count').toBeUndefined();
  });

  it('LONGRUN_SECRET_FILE is a key of a Secret mounted read-only', () => {
    const file = env['LONGRUN_SECRET_FILE'] as string;
    const mount = container.volumeMounts?.find((m) => path.dirname(file) === m.mountPath);
    expect(mount?.readOnly).toBe(true);
    const volume = podSpec.volumes?.find((v) => v.name === mount?.name);
    expect(volume?.secret?.secretName).toBe('longrun-secret');
    expect(volume?.secret?.items?.map((i) => i.path)).toContain(path.basename(file));
  });

  it('the Services target the container ports the listeners bind; the ops Service stays inside the cluster', () => {
    expect(namedPort(container, 'http')).toBe(config.http.listen.port);
    expect(namedPort(container, 'ops')).toBe(config.http.opsListen.port);
    const main = findResource(resources, 'Service', 'longrun').spec as { type: string; selector: Record<string, string>; ports: Array<{ targetPort: string }> };
    const ops = findResource(resources, 'Service', 'longrun-ops').spec as Record<string, unknown> & {
      type: string;
      selector: Record<string, string>;
      ports: Array<{ targetPort: string; nodePort?: number }>;
    };
    expect(main.ports.map((p) => namedPort(container, p.targetPort))).toEqual([config.http.listen.port]);
    expect(ops.ports.map((p) => namedPort(container, p.targetPort))).toEqual([config.http.opsListen.port]);
    expect(selects(main.selector, podLabels)).toBe(true);
    expect(selects(ops.selector, podLabels)).toBe(true);
    expect(ops.type).toBe('ClusterIP');
    expect(ops.ports.every((p) => p.nodePort === undefined)).toBe(true);
    for (const field of ['externalIPs', 'loadBalancerIP', 'loadBalancerSourceRanges', 'externalName']) expect(ops[field]).toBeUndefined();
  });

  it('probes are on the ops listener, at routes of the ops app: readiness 503 while draining, liveness 200', async () => {
    for (const probe of [container.readinessProbe, container.livenessProbe]) {
      expect(probe?.httpGet).toBeDefined();
      expect(namedPort(container, probe?.httpGet?.port as string)).toBe(config.http.opsListen.port);
    }
    let draining = false;
    const app = createOpsApp({ metrics: new Metrics({ defaultMetrics: false }), registry: new RunRegistry(config.run.maxDetachedRuns), isDraining: () => draining });
    const server = await new Promise<http.Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const status = async (p: string): Promise<number> => {
        const res = await request(`${url}${p}`);
        await res.body.dump();
        return res.statusCode;
      };
      const readiness = container.readinessProbe?.httpGet?.path as string;
      const liveness = container.livenessProbe?.httpGet?.path as string;
      expect(await status(readiness)).toBe(200);
      expect(await status(liveness)).toBe(200);
      draining = true;
      expect(await status(readiness), 'the readiness probe must fail during a drain').toBe(503);
      expect(await status(liveness), 'the liveness probe must not kill a draining pod').toBe(200);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('the termination grace period covers any preStop hook, the shutdown delay and the drain budget', () => {
    const preStop = container.lifecycle?.preStop;
    const sleepCommand = preStop?.exec?.command;
    const preStopS = preStop?.sleep?.seconds ?? (sleepCommand?.[0] === 'sleep' ? Number(sleepCommand[1]) : 0);
    expect(preStop === undefined || preStopS > 0, 'a preStop hook of unknown length').toBe(true);
    const neededS = preStopS + (config.drain.shutdownDelayMs + config.drain.timeoutMs) / 1_000 + MIN_EXIT_MARGIN_S;
    expect(podSpec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(neededS);
    // Draining takes the shutdown delay first: probes must see it early enough.
    expect(config.drain.shutdownDelayMs).toBeGreaterThan(0);
  });

  it('memory and the caps are sized together from BENCHMARKS.md (runs, WebSocket sessions, the backlog budget), and a full pod drains within the budget', () => {
    const { neededBytes, limit } = checkSizing(deployment);
    expect(neededBytes / MIB).toBeGreaterThan(IDLE_RSS_MIB);
    expect(limit).toBeGreaterThan(0);
  });

  it('docs/deploying.md states the grace period, the cap, the memory limit and the HPA target the manifests use', () => {
    const docs = readFileSync(fromRoot('docs/deploying.md'), 'utf8');
    const thousands = (n: number): string => n.toLocaleString('en-US').replaceAll(',', ' ');
    const hpa = findResource(resources, 'HorizontalPodAutoscaler').spec as { metrics: Array<{ pods?: { target: { averageValue: string } } }> };
    expect(docs).toContain(
      `\`terminationGracePeriodSeconds\` is ${podSpec.terminationGracePeriodSeconds} = ${config.drain.shutdownDelayMs / 1_000} (shutdown delay) + ${config.drain.timeoutMs / 1_000} (drain)`,
    );
    expect(docs).toContain(`**${thousands(config.run.maxDetachedRuns)} detached runs per pod**`);
    expect(docs).toContain(`**${thousands(config.websocket.maxSessions)} WebSocket sessions per pod**`);
    expect(docs).toContain(`${config.websocket.backlogBudgetBytes / MIB} MiB of parked backlogs`);
    expect(docs).toContain(`→ ${container.resources?.limits?.['memory']}`);
    const { neededBytes } = checkSizing(deployment);
    expect(docs).toContain(`= ${Math.round(neededBytes / MIB)} MiB`);
    expect(docs).toContain(`--max-old-space-size=${/--max-old-space-size=(\d+)/.exec(env['NODE_OPTIONS'] ?? '')?.[1]}`);
    expect(docs).toContain(`**${thousands(Number(hpa.metrics[0]?.pods?.target.averageValue))} runs in flight per pod**`);
  });

  it('runs as the image user, non-root, read-only root filesystem, no privilege escalation, no capabilities', () => {
    const user = parseDockerfile()
      .stages.at(-1)
      ?.instructions.filter((i) => i.keyword === 'USER')
      .at(-1)?.args;
    const [uid, gid] = (user ?? '').split(':').map(Number);
    expect(podSpec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: uid, runAsGroup: gid });
    expect(uid).toBeGreaterThan(0);
    expect(container.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
  });

  it('spreads its pods over zones and nodes', () => {
    const spread = podSpec.topologySpreadConstraints ?? [];
    expect(spread.map((c) => c.topologyKey).sort()).toEqual(['kubernetes.io/hostname', 'topology.kubernetes.io/zone']);
    for (const c of spread) expect(selects(c.labelSelector?.matchLabels, podLabels)).toBe(true);
  });
});

describe('scaling, disruptions, scraping and network access', () => {
  const exported = new GatewayMetrics({ defaultMetrics: false }).registry;

  it('the HPA scales the Deployment on a metric the gateway exports, through the documented adapter rule, before the cap', () => {
    const hpa = findResource(resources, 'HorizontalPodAutoscaler').spec as {
      scaleTargetRef: { kind: string; name: string };
      minReplicas: number;
      metrics: Array<{ type: string; pods?: { metric: { name: string }; target: { type: string; averageValue: string } } }>;
    };
    expect(hpa.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: deployment.metadata.name });
    expect(hpa.metrics).toHaveLength(1);
    const pods = hpa.metrics[0]?.pods;
    expect(exported.getSingleMetric(pods?.metric.name as string), `${pods?.metric.name} is exported`).toBeDefined();
    expect(Number(pods?.target.averageValue)).toBeLessThan(0.8 * config.run.maxDetachedRuns);
    const adapter = readYaml<{ rules: { custom: Array<{ seriesQuery: string; name: { as: string } }> } }>(fromRoot('deploy/prometheus/prometheus-adapter.yml'));
    const rule = adapter.rules.custom.find((r) => r.name.as === pods?.metric.name);
    expect(rule, 'prometheus-adapter rule for the HPA metric').toBeDefined();
    expect(exported.getSingleMetric(/^(\w+)/.exec(rule?.seriesQuery ?? '')?.[1] as string)).toBeDefined();
  });

  it('the PodDisruptionBudget covers the gateway pods and leaves most of the minimum replicas up', () => {
    const pdb = findResource(resources, 'PodDisruptionBudget').spec as { maxUnavailable: number; selector: { matchLabels: Record<string, string> } };
    const hpa = findResource(resources, 'HorizontalPodAutoscaler').spec as { minReplicas: number };
    expect(selects(pdb.selector.matchLabels, podLabels)).toBe(true);
    expect(pdb.maxUnavailable).toBe(1);
    expect(hpa.minReplicas).toBeGreaterThan(pdb.maxUnavailable);
  });

  it('the ServiceMonitor scrapes the ops Service only, at /metrics, as job "longrun" (what the rules select)', () => {
    const monitor = findResource(resources, 'ServiceMonitor').spec as {
      selector: { matchLabels: Record<string, string> };
      endpoints: Array<{ port: string; path: string; relabelings?: Array<{ targetLabel: string; replacement: string }> }>;
    };
    const ops = findResource(resources, 'Service', 'longrun-ops');
    const main = findResource(resources, 'Service', 'longrun');
    expect(selects(monitor.selector.matchLabels, ops.metadata.labels)).toBe(true);
    expect(selects(monitor.selector.matchLabels, main.metadata.labels)).toBe(false);
    expect(monitor.endpoints).toHaveLength(1);
    const endpoint = monitor.endpoints[0];
    expect((ops.spec as { ports: Array<{ name: string }> }).ports.map((p) => p.name)).toContain(endpoint?.port);
    expect(endpoint?.path).toBe('/metrics');
    const job = endpoint?.relabelings?.find((r) => r.targetLabel === 'job')?.replacement;
    const rules = readFileSync(fromRoot('deploy/prometheus/longrun-rules.yml'), 'utf8');
    const jobs = new Set([...rules.matchAll(/job="([^"]*)"/g)].map((m) => m[1]));
    expect([...jobs]).toEqual([job]);
  });

  it('the NetworkPolicy admits the owner to the main port and Prometheus to the ops port, nothing else', () => {
    type Peer = { namespaceSelector?: { matchLabels?: Record<string, string> }; podSelector?: { matchLabels?: Record<string, string> } };
    const policy = findResource(resources, 'NetworkPolicy').spec as {
      podSelector: { matchLabels: Record<string, string> };
      policyTypes: string[];
      ingress: Array<{ from?: Peer[]; ports?: Array<{ port: string }> }>;
    };
    expect(selects(policy.podSelector.matchLabels, podLabels)).toBe(true);
    expect(policy.policyTypes).toContain('Ingress');
    const byPort = Object.fromEntries(policy.ingress.map((rule) => [rule.ports?.map((p) => namedPort(container, p.port)).join(','), rule.from]));
    expect(Object.keys(byPort).sort()).toEqual([String(config.http.listen.port), String(config.http.opsListen.port)].sort());
    const owner = byPort[String(config.http.listen.port)];
    const prometheus = byPort[String(config.http.opsListen.port)];
    // Each rule names its peers by namespace and pod: an empty or missing `from` admits everyone.
    for (const peers of [owner, prometheus]) {
      expect(peers?.length).toBe(1);
      expect(Object.keys(peers?.[0]?.namespaceSelector?.matchLabels ?? {}).length).toBeGreaterThan(0);
      expect(Object.keys(peers?.[0]?.podSelector?.matchLabels ?? {}).length).toBeGreaterThan(0);
    }
    expect(prometheus?.[0]?.podSelector?.matchLabels).toEqual({ 'app.kubernetes.io/name': 'prometheus' });
  });

  it('the NetworkPolicy lets the pods reach DNS, the owner, Redis and HTTPS on public addresses only: nothing private, no metadata endpoint', () => {
    type Peer = {
      namespaceSelector?: { matchLabels?: Record<string, string> };
      podSelector?: { matchLabels?: Record<string, string> };
      ipBlock?: { cidr: string; except?: string[] };
    };
    const policy = findResource(resources, 'NetworkPolicy').spec as { policyTypes: string[]; egress: Array<{ to?: Peer[]; ports?: Array<{ port: number; protocol: string }> }> };
    expect(policy.policyTypes).toContain('Egress');
    // A rule without peers or ports admits everything.
    for (const rule of policy.egress) {
      expect(rule.to?.length, 'each egress rule names its peers').toBeGreaterThan(0);
      expect(rule.ports?.length, 'each egress rule names its ports').toBeGreaterThan(0);
    }
    const admits = (port: number, protocol = 'TCP'): Peer[] =>
      policy.egress.filter((r) => r.ports?.some((p) => p.port === port && p.protocol === protocol)).flatMap((r) => r.to ?? []);
    expect(admits(53, 'UDP').some((p) => p.podSelector?.matchLabels?.['k8s-app'] === 'kube-dns')).toBe(true);
    const ownerPort = Number(config.owner.url?.port || 443);
    expect(admits(ownerPort).some((p) => p.namespaceSelector !== undefined && p.podSelector?.matchLabels?.['app.kubernetes.io/name'] === 'owner')).toBe(true);
    const sentinelPorts = merged['LONGRUN_REDIS_URL']?.match(/:(\d+)/g)?.map((m) => Number(m.slice(1))) ?? [];
    for (const port of [Number(new URL(env['LONGRUN_REDIS_URL'] as string).port || 6379), ...sentinelPorts]) {
      expect(
        admits(port).some((p) => p.podSelector !== undefined && p.ipBlock === undefined),
        `Redis port ${port}`,
      ).toBe(true);
    }
    // Anything admitted by address is public: private, loopback, link-local (cloud metadata) and CGNAT ranges excluded.
    const blocks = policy.egress.flatMap((r) => r.to ?? []).flatMap((p) => (p.ipBlock ? [p.ipBlock] : []));
    expect(blocks.map((b) => b.cidr).sort()).toEqual(['0.0.0.0/0', '::/0']);
    const v4 = blocks.find((b) => b.cidr === '0.0.0.0/0');
    expect([...(v4?.except ?? [])].sort()).toEqual(['10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.168.0.0/16']);
    expect([...(blocks.find((b) => b.cidr === '::/0')?.except ?? [])].sort()).toEqual(['::1/128', 'fc00::/7', 'fe80::/10']);
    expect(policy.egress.filter((r) => r.to?.some((p) => p.ipBlock)).flatMap((r) => r.ports?.map((p) => p.port))).toEqual([443]);
  });
});

describe('the Sentinel overlay', () => {
  it('builds on the base and changes only LONGRUN_REDIS_URL', () => {
    expect(overlay.resources.map((r) => path.resolve(SENTINEL_DIR, r))).toEqual([BASE_DIR]);
    expect(patch.metadata.name).toBe(deployment.metadata.name);
    expect(patchEnv.map((v) => v.name)).toEqual(['LONGRUN_REDIS_URL']);
  });

  it('its LONGRUN_REDIS_URL parses and is in the Sentinel form of docs/spec.md §5', () => {
    const sentinel = loadConfig({ ...merged, LONGRUN_SECRET_FILE: secretFile });
    // redis+sentinel://[:password@]host:port[,host:port...]/<master-name>[?db=N]
    expect(merged['LONGRUN_REDIS_URL']).toMatch(/^redis\+sentinel:\/\/(?::[^@/]+@)?[\w.-]+:\d+(?:,[\w.-]+:\d+)*\/[\w.-]+(?:\?db=\d+)?$/);
    expect(sentinel.redis.target?.mode).toBe('sentinel');
    expect(sentinel.redis.target?.mode === 'sentinel' ? sentinel.redis.target.sentinels : [], 'three Sentinels').toHaveLength(3);
    expect({ ...sentinel, redis: { ...sentinel.redis, target: undefined } }).toEqual({ ...config, redis: { ...config.redis, target: undefined } });
  });
});

describe('kustomize', () => {
  const kubectl = findKubectl();
  const ci = process.env['CI'];
  const inCi = ci !== undefined && ci !== '' && ci !== 'false' && ci !== '0';
  const skip = kubectl || inCi ? undefined : 'kubectl is not installed (its `kubectl kustomize` renders the manifests); skipped outside CI';

  it('`kubectl kustomize` renders the base: the same resources, valid, with the image set', (ctx) => {
    if (skip) {
      console.warn(`SKIPPED kustomize render: ${skip}`);
      ctx.skip(skip);
      return;
    }
    expect(kubectl, 'kubectl is required in CI').toBeDefined();
    const rendered = kustomize(kubectl as string, BASE_DIR);
    const key = (r: Resource): string => `${r.kind}/${r.metadata.name}`;
    expect(rendered.map(key).sort()).toEqual(resources.map(key).sort());
    for (const resource of rendered) expect(() => validate(resource), key(resource)).not.toThrow();
    const image = readYaml<Kustomization>(path.join(BASE_DIR, 'kustomization.yaml')).images?.[0];
    const renderedDeployment = findResource<Deployment>(rendered, 'Deployment');
    expect(gatewayContainer(renderedDeployment).image).toBe(`${image?.newName}:${image?.newTag}`);
    // The caps fit the memory limit as rendered, not only as written.
    checkSizing(renderedDeployment);
    // Every alert's runbook is an absolute URL: the page the PrometheusRule's annotation names.
    const rule = findResource(rendered, 'PrometheusRule');
    const page = (rule.metadata as { annotations?: Record<string, string> }).annotations?.['longrun/runbook-page'] as string;
    expect(new URL(page).protocol).toBe('https:');
    const urls = (rule.spec as { groups: Array<{ rules: Array<{ alert?: string; annotations?: { runbook_url?: string } }> }> }).groups
      .flatMap((g) => g.rules)
      .filter((r) => r.alert)
      .map((r) => r.annotations?.runbook_url);
    expect(urls.length).toBeGreaterThan(8);
    expect(new Set(urls)).toEqual(new Set([`${page}#alerts`]));
  });

  it('an overlay moves every alert runbook by setting one annotation, as docs/deploying.md shows it', (ctx) => {
    if (skip) {
      console.warn(`SKIPPED kustomize render: ${skip}`);
      ctx.skip(skip);
      return;
    }
    // The overlay of docs/deploying.md "Alert runbooks", pointed at the base.
    const docs = readFileSync(fromRoot('docs/deploying.md'), 'utf8');
    const snippet = /## Alert runbooks[\s\S]*?```yaml\n([\s\S]*?)```/.exec(docs)?.[1];
    expect(snippet, 'docs/deploying.md "Alert runbooks" has the overlay').toBeDefined();
    const dir = mkdtempSync(path.join(tmpdir(), 'longrun-overlay-'));
    try {
      writeFileSync(
        path.join(dir, 'kustomization.yaml'),
        (snippet as string).replace(/^ {2}- \.\.\/\.\.\/base$|^ {2}- [^\n]*deploy\/kubernetes\/base$/m, `  - ${path.relative(dir, BASE_DIR)}`),
      );
      const rendered = kustomize(kubectl as string, dir);
      const rule = findResource(rendered, 'PrometheusRule');
      const page = (rule.metadata as { annotations?: Record<string, string> }).annotations?.['longrun/runbook-page'] as string;
      expect(page).not.toContain('example.com');
      const urls = (rule.spec as { groups: Array<{ rules: Array<{ alert?: string; annotations?: { runbook_url?: string } }> }> }).groups
        .flatMap((g) => g.rules)
        .filter((r) => r.alert)
        .map((r) => r.annotations?.runbook_url);
      expect(new Set(urls)).toEqual(new Set([`${page}#alerts`]));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('`kubectl kustomize` renders the Sentinel overlay: the base with the Sentinel URL, valid', (ctx) => {
    if (skip) {
      console.warn(`SKIPPED kustomize render: ${skip}`);
      ctx.skip(skip);
      return;
    }
    const rendered = kustomize(kubectl as string, SENTINEL_DIR);
    for (const resource of rendered) expect(() => validate(resource), `${resource.kind}/${resource.metadata.name}`).not.toThrow();
    const renderedEnv = containerEnv(gatewayContainer(findResource<Deployment>(rendered, 'Deployment')).env);
    expect(renderedEnv).toEqual(merged);
    expect(renderedEnv['LONGRUN_REDIS_URL']).toMatch(/^redis\+sentinel:\/\//);
  });
});
