/**
 * startStack: the one way tests and benchmarks start longrun with what it talks to — the simulated owner and workflow services, a secret file, Redis (none,
 * its own, a given one, Sentinel or Cluster), a Workhorse-like front, and gateway replicas —
 * each piece in this process or in processes of its own, as the options say. close() closes
 * everything it started, gateways first.
 *
 *   startStack({ redis: 'own', preauth: { detached: true } })           a Gateway in this process
 *   startStack({ gateway: 'process', replicas: 0, name: 'drain' })      replicas started per test
 *   startStack({ gateway: 'process', simulators: 'process', children: { deployed: true } })   a benchmark's
 */
import type { Redis } from 'ioredis';
import type { Dispatcher } from 'undici';
import type { Gateway } from '../src/gateway';
import type { Tracing } from '../src/observability/tracing';
import type { PreauthConfig } from '../sandbox/owner-sim';
import type { WorkflowSimulatorOptions } from '../sandbox/workflow-sim';
import { WorkhorseFront } from '../sandbox/workhorse-front';
import { GatewayChild } from './gateway-child';
import type { GatewayInProcess } from './gateway-in-process';
import { execute, executeText, type ExecuteOptions, type TextReply } from './gateway-requests';
import { CpuMeter } from './process-stats';
import type { RedisClusterTopology } from './redis-cluster';
import type { RedisServer } from './redis-server';
import type { SentinelTopology } from './redis-sentinel';
import { removeSecretFile, testSecret, writeSecretFile } from './secret';
import { ReplicaSet, type AnyReplica, type ChildSettings, type ReplicaOptions } from './replica-set';
import { startSimulators, type InProcessSimulators, type Place, type SimulatorProcesses, type Simulators } from './simulators';
import { startStackRedis, type StackRedis, type StackRedisParts } from './stack-redis';

export type { Place } from './simulators';
export type { StackRedis } from './stack-redis';
export type { ChildSettings, ReplicaOptions } from './replica-set';

/** One gateway of a stack: a GatewayInProcess, or a GatewayChild (gateway: 'process'). */
export type Replica<G extends Place = 'in-process'> = G extends 'process' ? GatewayChild : GatewayInProcess;

export interface StackOptions<G extends Place = 'in-process', S extends Place = 'in-process'> {
  /** Where the gateways run: here (Gateway.start, its log captured; the default) or as `node dist/src/main.js` children. */
  gateway?: G;
  /** The replicas started with the stack: how many, or their names (default 1). */
  replicas?: number | readonly string[];
  /**
   * Their name prefix: `<name>-a`, `<name>-b`, … by the first letters no live replica holds
   * (default `replica`). A name is its LONGRUN_REPLICA_ID; in-process ones are named only
   * when a name is given (else the configuration's default).
   */
  name?: string;
  /** Where the simulators run (default here), or another stack's (`stack.simulators`), which this one does not close. */
  simulators?: S | ((InProcessSimulators | SimulatorProcesses) & { readonly where: S });
  redis?: StackRedis;
  /** Variables for every gateway, over the stack's (owner, secret, Redis, listeners). */
  env?: Record<string, string>;
  /** The shared secret (default testSecret). */
  secret?: Buffer;
  /** The owner's preauth answer for every workflow. */
  preauth?: PreauthConfig;
  workflow?: WorkflowSimulatorOptions;
  /** The host the owner names the workflow service by (a TLS certificate's name). */
  workflowHost?: string;
  /** Relays through a Workhorse-like front of the owner (LONGRUN_RELAY_URL: `stack.front`), as beside GitLab. */
  workhorseFront?: boolean;
  /** In-process gateways' spans go here (test/helpers/spans.ts: the SDK's in-memory exporter). */
  tracing?: Tracing;
  /** How child processes run (gateway-child.ts); `simulatorNodeArgs` are the simulator processes' node flags. */
  children?: ChildSettings;
}

export interface Stack<G extends Place = 'in-process', S extends Place = 'in-process'> {
  readonly simulators: Simulators<S>;
  readonly owner: Simulators<S>['owner'];
  /** The workflow simulator running now (restartWorkflow replaces it). */
  readonly workflow: Simulators<S>['workflow'];
  /** With `workhorseFront: true`: the front the relays go through. */
  readonly front?: WorkhorseFront;
  readonly redisUrl?: string;
  /** With `redis: 'own'`: the stack's redis-server, and a client on it (errors ignored). */
  readonly redis?: RedisServer;
  readonly client?: Redis;
  readonly sentinel?: SentinelTopology;
  readonly cluster?: RedisClusterTopology;
  readonly secret: Buffer;
  readonly secretFile: string;
  /** The variables every gateway of the stack gets (before each replica's own). */
  readonly gatewayEnv: Readonly<Record<string, string>>;
  /** Every replica started and not closed (one that exited by itself included): the stack's own first, then those started since. */
  readonly replicas: readonly Replica<G>[];
  /** The first of the stack's own replicas: the Gateway itself in-process, its GatewayChild otherwise; its url, logs, metrics and executes. */
  readonly gateway: G extends 'process' ? GatewayChild : Gateway;
  readonly url: string;
  readonly opsUrl: string;
  logs(): string;
  metrics(): Promise<string>;
  execute(workflowId: string, options?: ExecuteOptions): Promise<Dispatcher.ResponseData>;
  executeText(workflowId: string, options?: ExecuteOptions): Promise<TextReply>;
  /** Another replica on the stack's owner, workflow service, secret and Redis, closed with the stack (or by closeReplicas). */
  startReplica(options?: ReplicaOptions): Promise<Replica<G>>;
  /** `n` more at once; those that started are kept (and closed later) when one fails. */
  startReplicas(n: number, env?: Record<string, string>): Promise<Replica<G>[]>;
  /** Closes `replica` and starts another in its place: its name, settings and main port. */
  restartReplica(replica: Replica<G>): Promise<Replica<G>>;
  /** Closes every replica started after the stack (a test file's afterEach); the stack's own stay. */
  closeReplicas(): Promise<void>;
  restartWorkflow(options?: { downMs?: number }): Promise<Simulators<S>['workflow']>;
  /** Process ids by name — `gateway` (or `gateway_<i>` for several), `owner_sim`, `workflow_sim`, `redis`, `driver` — of those known. */
  pids(): Record<string, number>;
  /** A CpuMeter started now over pids(). */
  cpu(): CpuMeter;
  close(): Promise<void>;
}

export { ndjsonLines, ownerJwt, type ExecuteOptions } from './gateway-requests';
export { metricValue } from './metric-text';

/** Starts the pieces in order (Redis, simulators, front, secret, gateways); a failure closes those started. */
export async function startStack<G extends Place = 'in-process', S extends Place = 'in-process'>(options: StackOptions<G, S> = {}): Promise<Stack<G, S>> {
  const cleanups: Array<() => Promise<unknown>> = [];
  const closeStarted = async (): Promise<void> => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  };
  try {
    const redis = await startStackRedis(options.redis ?? 'none');
    cleanups.push(() => redis.close());
    const secret = options.secret ?? testSecret;
    const shared = typeof options.simulators === 'object' ? options.simulators : undefined;
    const simulators =
      shared ??
      (await startSimulators(options.simulators === 'process' ? 'process' : 'in-process', {
        secret,
        ...(options.preauth ? { preauth: options.preauth } : {}),
        ...(options.workflow ? { workflow: options.workflow } : {}),
        ...(options.workflowHost ? { workflowHost: options.workflowHost } : {}),
        ...(options.children?.simulatorNodeArgs ? { nodeArgs: options.children.simulatorNodeArgs } : {}),
      }));
    if (!shared) cleanups.push(() => simulators.close());
    const ownerUrl = simulators.where === 'process' ? simulators.owner.address : simulators.owner.url;
    const front = options.workhorseFront ? await WorkhorseFront.start({ upstream: ownerUrl, secret }) : undefined;
    if (front) cleanups.push(() => front.close());
    const secretFile = await writeSecretFile(secret);
    cleanups.push(() => removeSecretFile(secretFile));
    const gatewayEnv = {
      LONGRUN_OWNER_URL: ownerUrl,
      ...(front ? { LONGRUN_RELAY_URL: front.url } : {}),
      LONGRUN_SECRET_FILE: secretFile,
      ...redis.env,
      ...options.env,
    };
    const replicas = new ReplicaSet(
      {
        where: options.gateway === 'process' ? 'process' : 'in-process',
        prefix: options.name,
        own: options.replicas ?? 1,
        ...(options.tracing ? { tracing: options.tracing } : {}),
        children: options.children ?? {},
      },
      secret,
      gatewayEnv,
    );
    cleanups.push(() => replicas.closeAll());
    await replicas.startOwn();
    return assemble({ redis, simulators, front, secret, secretFile, gatewayEnv, replicas, close: closeStarted }) as unknown as Stack<G, S>;
  } catch (err) {
    await closeStarted();
    throw err;
  }
}

interface Parts {
  redis: StackRedisParts;
  simulators: InProcessSimulators | SimulatorProcesses;
  front: WorkhorseFront | undefined;
  secret: Buffer;
  secretFile: string;
  gatewayEnv: Record<string, string>;
  replicas: ReplicaSet;
  close(): Promise<void>;
}

function assemble(parts: Parts): Stack<Place, Place> {
  const { redis, simulators, replicas } = parts;
  const first = (): AnyReplica => replicas.first();
  let closing: Promise<void> | undefined;
  const stack = {
    simulators,
    owner: simulators.owner,
    get workflow() {
      return simulators.workflow;
    },
    ...(parts.front ? { front: parts.front } : {}),
    ...(redis.url ? { redisUrl: redis.url } : {}),
    ...(redis.server ? { redis: redis.server, client: redis.client } : {}),
    ...(redis.sentinel ? { sentinel: redis.sentinel } : {}),
    ...(redis.cluster ? { cluster: redis.cluster } : {}),
    secret: parts.secret,
    secretFile: parts.secretFile,
    gatewayEnv: parts.gatewayEnv,
    get replicas() {
      return replicas.live();
    },
    get gateway() {
      const replica = first();
      return replica instanceof GatewayChild ? replica : replica.gateway;
    },
    get url() {
      return first().url;
    },
    get opsUrl() {
      return first().opsUrl;
    },
    logs: () => first().logs(),
    metrics: () => first().metrics(),
    execute: (workflowId: string, opts?: ExecuteOptions) => execute(first().url, workflowId, opts),
    executeText: (workflowId: string, opts?: ExecuteOptions) => executeText(first().url, workflowId, opts),
    startReplica: (opts?: ReplicaOptions) => replicas.start(opts),
    startReplicas: (n: number, env?: Record<string, string>) => replicas.startMany(n, env),
    restartReplica: (replica: AnyReplica) => replicas.restart(replica),
    closeReplicas: () => replicas.closeStarted(),
    restartWorkflow: (opts?: { downMs?: number }) => simulators.restartWorkflow(opts),
    pids: () => {
      const children = replicas.live().filter((r): r is GatewayChild => r instanceof GatewayChild);
      const redisPid = redis.pid();
      return {
        ...(children.length === 1 ? { gateway: (children[0] as GatewayChild).pid } : Object.fromEntries(children.map((g, i) => [`gateway_${i}`, g.pid]))),
        ...simulators.pids(),
        ...(redisPid === undefined ? {} : { redis: redisPid }),
        driver: process.pid,
      };
    },
    cpu: () => new CpuMeter(stack.pids()).start(),
    close: () => (closing ??= parts.close()),
  };
  return stack as unknown as Stack<Place, Place>;
}
