/**
 * What the deploy tests read: the Kubernetes manifests under deploy/kubernetes (parsed
 * with `yaml`), the container's environment as a pod would see it, `kubectl kustomize`
 * when kubectl is installed, and the Dockerfile's instructions.
 *
 * Only the fields the tests look at are typed; schema validation of the whole objects is
 * done with kubernetes-models (test/integration/deploy-manifests.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { fromRoot } from '../../src/core/paths';

export const BASE_DIR = fromRoot('deploy/kubernetes/base');
export const SENTINEL_DIR = fromRoot('deploy/kubernetes/overlays/sentinel');

/** A Kubernetes object as parsed from YAML. */
export interface Resource {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: unknown;
  [key: string]: unknown;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: unknown; configMapKeyRef?: unknown };
}

export interface HttpProbe {
  httpGet?: { path: string; port: string | number };
  periodSeconds?: number;
  failureThreshold?: number;
}

export interface Container {
  name: string;
  image: string;
  ports?: Array<{ name?: string; containerPort: number }>;
  env?: EnvVar[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  readinessProbe?: HttpProbe;
  livenessProbe?: HttpProbe;
  lifecycle?: { preStop?: { exec?: { command: string[] }; sleep?: { seconds: number } } };
  securityContext?: {
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    capabilities?: { drop?: string[] };
  };
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}

export interface PodSpec {
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; runAsGroup?: number };
  topologySpreadConstraints?: Array<{ topologyKey: string; labelSelector?: { matchLabels?: Record<string, string> } }>;
  containers: Container[];
  volumes?: Array<{ name: string; secret?: { secretName: string; items?: Array<{ key: string; path: string }> }; emptyDir?: unknown }>;
}

export interface Deployment extends Resource {
  spec: {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
}

/** Every YAML document of a file; throws on a YAML error. */
export function readYamlDocs(file: string): unknown[] {
  const docs = YAML.parseAllDocuments(readFileSync(file, 'utf8'));
  const out: unknown[] = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value: unknown = doc.toJS();
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}

export function readYaml<T>(file: string): T {
  const docs = readYamlDocs(file);
  if (docs.length !== 1) throw new Error(`${file}: expected one YAML document, found ${docs.length}`);
  return docs[0] as T;
}

export interface Kustomization {
  resources: string[];
  patches?: Array<{ path: string }>;
  images?: Array<{ name: string; newName?: string; newTag?: string }>;
}

/** The base's resources in kustomization order, each with the file it came from. */
export function baseResources(): Array<{ file: string; resource: Resource }> {
  const kustomization = readYaml<Kustomization>(path.join(BASE_DIR, 'kustomization.yaml'));
  return kustomization.resources.flatMap((file) => readYamlDocs(path.join(BASE_DIR, file)).map((doc) => ({ file, resource: doc as Resource })));
}

export function findResource<T extends Resource>(resources: Resource[], kind: string, name?: string): T {
  const matches = resources.filter((r) => r.kind === kind && (name === undefined || r.metadata.name === name));
  if (matches.length !== 1) throw new Error(`expected one ${kind}${name ? ` named ${name}` : ''}, found ${matches.length}`);
  return matches[0] as T;
}

export function gatewayContainer(deployment: Deployment): Container {
  const container = deployment.spec.template.spec.containers.find((c) => c.name === 'longrun');
  if (!container) throw new Error('the Deployment has no container named longrun');
  return container;
}

/** A pod name as the fieldRef metadata.name would give it. */
export const SAMPLE_POD_NAME = 'longrun-6d5f9c7b8-x2k4q';

/**
 * The container's environment as the process would see it: literal values, and
 * metadata.name field references resolved to SAMPLE_POD_NAME. Any other kind of
 * reference throws (the tests would not know its value).
 */
export function containerEnv(env: EnvVar[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const v of env ?? []) {
    if (v.name in out) throw new Error(`${v.name} is set twice`);
    if (v.value !== undefined) out[v.name] = v.value;
    else if (v.valueFrom?.fieldRef?.fieldPath === 'metadata.name') out[v.name] = SAMPLE_POD_NAME;
    else throw new Error(`${v.name}: unsupported value source ${JSON.stringify(v.valueFrom)}`);
  }
  return out;
}

/**
 * A strategic-merge patch's env list applied to a base env list, as kustomize does it
 * for `env` (merge key `name`: an entry replaces the base entry of the same name, a new
 * name is added).
 */
export function mergeEnv(base: EnvVar[], patch: EnvVar[]): EnvVar[] {
  const out = base.map((v) => patch.find((p) => p.name === v.name) ?? v);
  for (const p of patch) if (!base.some((v) => v.name === p.name)) out.push(p);
  return out;
}

/** `kubectl` when it runs (`kubectl version --client`), else undefined. */
export function findKubectl(): string | undefined {
  for (const candidate of ['kubectl', '/usr/bin/kubectl', '/usr/local/bin/kubectl']) {
    const probe = spawnSync(candidate, ['version', '--client'], { stdio: 'ignore', timeout: 20_000 });
    if (!probe.error && probe.status === 0) return candidate;
  }
  return undefined;
}

/** `kubectl kustomize <dir>`, parsed. Throws with kubectl's output when it fails. */
export function kustomize(kubectl: string, dir: string): Resource[] {
  const result = spawnSync(kubectl, ['kustomize', dir], { encoding: 'utf8', timeout: 60_000 });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`kubectl kustomize ${dir} failed: ${result.stderr}`);
  return YAML.parseAllDocuments(result.stdout).map((d) => d.toJS() as Resource);
}

export interface DockerInstruction {
  keyword: string;
  args: string;
}

export interface DockerStage {
  from: string;
  name: string | undefined;
  instructions: DockerInstruction[];
}

/**
 * The Dockerfile's stages with their instructions (continuation lines joined, comments
 * dropped), and its comment lines.
 */
export function parseDockerfile(file = fromRoot('Dockerfile')): { stages: DockerStage[]; comments: string[]; preamble: DockerInstruction[] } {
  const lines = readFileSync(file, 'utf8').split('\n');
  const comments: string[] = [];
  const instructions: DockerInstruction[] = [];
  let pending = '';
  for (const line of lines) {
    const trimmed = line.trim();
    if (trimmed.startsWith('#')) {
      comments.push(trimmed.replace(/^#\s?/, ''));
      continue;
    }
    if (trimmed === '' && pending === '') continue;
    pending += `${pending ? ' ' : ''}${trimmed.replace(/\\$/, '').trim()}`;
    if (trimmed.endsWith('\\')) continue;
    const match = /^(\S+)\s*(.*)$/.exec(pending);
    if (match) instructions.push({ keyword: (match[1] as string).toUpperCase(), args: match[2] as string });
    pending = '';
  }
  const stages: DockerStage[] = [];
  const preamble: DockerInstruction[] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const [from, as, name] = instruction.args.split(/\s+/);
      stages.push({ from: from as string, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
    } else if (stages.length === 0) {
      preamble.push(instruction);
    } else {
      (stages[stages.length - 1] as DockerStage).instructions.push(instruction);
    }
  }
  return { stages, comments, preamble };
}

/** Parses a Kubernetes memory quantity (Mi, Gi, Ki, M, G or plain bytes) into bytes. */
export function memoryBytes(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(quantity);
  if (!match) throw new Error(`unsupported memory quantity ${quantity}`);
  const units: Record<string, number> = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, K: 1e3, M: 1e6, G: 1e9 };
  return Number(match[1]) * (match[2] ? (units[match[2]] as number) : 1);
}
