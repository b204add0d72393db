/**
 * A stack's gateway replicas: its own (started with it) and those started since, wherever
 * they run (gateway-in-process.ts, gateway-child.ts), on the stack's variables; named
 * `<prefix>-a`, `-b`, … by the first letters no live replica holds, so a test file whose
 * tests each start and close theirs sees the same names in every test.
 */
import type { Tracing } from '../src/observability/tracing';
import { GatewayChild, type GatewayChildOptions } from './gateway-child';
import { startGatewayInProcess, type GatewayInProcess } from './gateway-in-process';
import type { Place } from './simulators';

export type AnyReplica = GatewayChild | GatewayInProcess;

/** How child gateways and simulator processes run. */
export interface ChildSettings {
  /** The gateways' entry point (default gateway-child.ts defaultGatewayMain()). */
  main?: string;
  /** Node flags of every child gateway. */
  nodeArgs?: readonly string[];
  simulatorNodeArgs?: readonly string[];
  deployed?: boolean;
  outputLimitChars?: number;
  drainOnClose?: boolean;
}

export interface ReplicaOptions {
  /** Default: the stack's prefix and the first free letter. */
  name?: string;
  /** Over the stack's env. */
  env?: Record<string, string>;
  /** In-process: where its spans go (default the stack's tracing). */
  tracing?: Tracing;
  /** Child: its main listener's port (default a free one). */
  port?: number;
  /** Child: another build's entry point. */
  main?: string;
  /** Child: node flags after the stack's. */
  nodeArgs?: readonly string[];
}

export interface ReplicaSetSettings {
  where: Place;
  /** The name prefix; undefined: `replica` for children, and in-process replicas unnamed. */
  prefix: string | undefined;
  /** The stack's own: how many, or their names. */
  own: number | readonly string[];
  tracing?: Tracing;
  children: ChildSettings;
}

export class ReplicaSet {
  private readonly own: AnyReplica[] = [];
  private readonly started: AnyReplica[] = [];
  private readonly restarts = new Map<AnyReplica, (port: number) => Promise<AnyReplica>>();
  private readonly prefix: string;

  constructor(
    private readonly settings: ReplicaSetSettings,
    private readonly secret: Buffer,
    private readonly env: Record<string, string>,
  ) {
    this.prefix = settings.prefix ?? 'replica';
  }

  live(): AnyReplica[] {
    return [...this.own, ...this.started];
  }

  first(): AnyReplica {
    const replica = this.own[0];
    if (!replica) throw new Error('this stack started no replica of its own (replicas: 0): use the ones startReplica returns');
    return replica;
  }

  async startOwn(): Promise<void> {
    const { own } = this.settings;
    const names = typeof own === 'number' ? this.freeNames(own) : own;
    await this.startAll(
      names.map((name) => ({ name })),
      this.own,
    );
  }

  async start(options: ReplicaOptions = {}): Promise<AnyReplica> {
    const [replica] = await this.startAll([options], this.started);
    return replica as AnyReplica;
  }

  startMany(n: number, env: Record<string, string> = {}): Promise<AnyReplica[]> {
    return this.startAll(
      this.freeNames(n).map((name) => ({ name, env })),
      this.started,
    );
  }

  async restart(replica: AnyReplica): Promise<AnyReplica> {
    const list = this.own.includes(replica) ? this.own : this.started;
    const at = list.indexOf(replica);
    const again = this.restarts.get(replica);
    if (at < 0 || !again) throw new Error(`replica ${replica.name ?? ''} is not a live one of this stack's`);
    list.splice(at, 1);
    this.restarts.delete(replica);
    await replica.close();
    const next = await again(Number(new URL(replica.url).port));
    list.splice(at, 0, next);
    return next;
  }

  async closeStarted(): Promise<void> {
    await this.closeEach(this.started.splice(0));
  }

  async closeAll(): Promise<void> {
    await this.closeEach([...this.own.splice(0), ...this.started.splice(0)]);
  }

  private async closeEach(replicas: AnyReplica[]): Promise<void> {
    for (const replica of replicas) this.restarts.delete(replica);
    await Promise.allSettled(replicas.map((r) => r.close()));
  }

  /** Starts them together; keeps in `into` every one that started, then throws the first failure. */
  private async startAll(list: ReplicaOptions[], into: AnyReplica[]): Promise<AnyReplica[]> {
    const results = await Promise.allSettled(list.map((options) => this.startOne(options)));
    const up = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    into.push(...up);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    return up;
  }

  /** Starts one, and keeps how to start it again on its main port. */
  private async startOne(options: ReplicaOptions): Promise<AnyReplica> {
    const env = { ...this.env, ...options.env };
    let again: (port: number) => Promise<AnyReplica>;
    if (this.settings.where === 'process') {
      const { children } = this.settings;
      const main = options.main ?? children.main;
      const settings: GatewayChildOptions = {
        name: options.name ?? (this.freeNames(1)[0] as string),
        env,
        secret: this.secret,
        ...(main === undefined ? {} : { main }),
        nodeArgs: [...(children.nodeArgs ?? []), ...(options.nodeArgs ?? [])],
        ...(children.deployed ? { deployed: true } : {}),
        ...(children.outputLimitChars === undefined ? {} : { outputLimitChars: children.outputLimitChars }),
        ...(children.drainOnClose ? { drainOnClose: true } : {}),
      };
      again = (port) => GatewayChild.start({ ...settings, port });
      const replica = await GatewayChild.start({ ...settings, ...(options.port === undefined ? {} : { port: options.port }) });
      this.restarts.set(replica, again);
      return replica;
    }
    // In process, a replica is named only when asked to: else LONGRUN_REPLICA_ID keeps its default.
    const name = options.name ?? (this.settings.prefix === undefined ? undefined : this.freeNames(1)[0]);
    const inProcessEnv = { LONGRUN_LISTEN: '127.0.0.1:0', LONGRUN_OPS_LISTEN: '127.0.0.1:0', LONGRUN_LOG_LEVEL: 'debug', ...(name ? { LONGRUN_REPLICA_ID: name } : {}), ...env };
    const tracing = options.tracing ?? this.settings.tracing;
    again = (port) => startGatewayInProcess(name, { ...inProcessEnv, LONGRUN_LISTEN: `127.0.0.1:${port}` }, tracing);
    const replica = await startGatewayInProcess(name, inProcessEnv, tracing);
    this.restarts.set(replica, again);
    return replica;
  }

  /** `<prefix>-a`, `-b`, …: the first `n` letters no live replica's name holds. */
  private freeNames(n: number): string[] {
    const taken = new Set(this.live().map((r) => r.name));
    const names: string[] = [];
    for (let i = 0; names.length < n; i++) {
      const name = `${this.prefix}-${String.fromCharCode(97 + i)}`;
      if (!taken.has(name)) names.push(name);
    }
    return names;
  }
}
