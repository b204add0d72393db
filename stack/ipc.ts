/**
 * A typed request/answer channel between a driver and a helper process it forks (a
 * simulator of a stack, a benchmark's raw-stream holder): the child's first message says
 * it is ready (and its address); then every question carries an id and gets exactly one answer.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { exitOf, tailOutput } from './child';
import { readRss } from './process-stats';
import { withTimeout } from './wait';

/** A map from question kind to its arguments and its answer. */
export type QueryMap = Record<string, { args: unknown; result: unknown }>;

interface RequestMessage {
  id: number;
  kind: string;
  args: unknown;
}

type ReplyMessage = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };

interface ReadyMessage {
  ready: true;
  address: string;
}

export type Handlers<Q extends QueryMap> = { [K in keyof Q]?: (args: Q[K]['args']) => Promise<Q[K]['result']> | Q[K]['result'] };

/** The driver's side: a forked helper process answering questions of Q. */
export class IpcChild<Q extends QueryMap> {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    /** What the child reported in its ready message (e.g. the address it listens on). */
    readonly address: string,
    private readonly output: () => string,
  ) {
    child.on('message', (message: ReplyMessage) => {
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      if (message.ok) waiter.resolve(message.result);
      else waiter.reject(new Error(`${name}: ${message.error}`));
    });
    child.once('exit', (code, signal) => {
      for (const waiter of this.pending.values()) waiter.reject(new Error(`${name} exited (${code ?? signal}): ${this.output()}`));
      this.pending.clear();
    });
  }

  /** Forks the built `script` (a path) with an IPC channel; resolves once it reports ready. */
  static async start<Q extends QueryMap>(name: string, script: string, options: { env?: Record<string, string>; execArgv?: readonly string[] } = {}): Promise<IpcChild<Q>> {
    const child = fork(script, [], {
      env: { ...process.env, ...options.env },
      execArgv: [...(options.execArgv ?? [])],
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const output = tailOutput(child);
    const ready = new Promise<string>((resolve, reject) => {
      child.once('message', (message: ReadyMessage) => resolve(message.address));
      child.once('exit', (code) => reject(new Error(`${name} exited (${code}) before it was ready: ${output()}`)));
    });
    const address = await withTimeout(ready, 15_000, `${name} to start`);
    return new IpcChild<Q>(name, child, address, output);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** Resident memory of the child, in bytes. */
  rss(): number {
    return readRss(this.pid);
  }

  /** Asks the child; rejects when it answers with an error, exits, or takes longer than timeoutMs. */
  query<K extends keyof Q & string>(kind: K, args: Q[K]['args'], timeoutMs = 120_000): Promise<Q[K]['result']> {
    const id = this.nextId++;
    const answer = new Promise<Q[K]['result']>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
    });
    const message: RequestMessage = { id, kind, args };
    this.child.send(message);
    return withTimeout(answer, timeoutMs, `${this.name} to answer ${kind}`);
  }

  /** Closes the IPC channel (the child exits by itself, writing a profile if asked to), then SIGKILL after 5 s. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    if (this.child.connected) this.child.disconnect();
    const exited = await withTimeout(exitOf(this.child), 5_000, `${this.name} to exit`).then(
      () => true,
      () => false,
    );
    if (exited) return;
    this.child.kill('SIGKILL');
    await exitOf(this.child);
  }
}

/**
 * The child's side: reports ready with `address`, answers each question with its
 * handler, and exits when the driver goes away (so nothing outlives a bench run).
 */
export function serveIpc<Q extends QueryMap>(address: string, handlers: Handlers<Q>): void {
  const send = (message: ReadyMessage | ReplyMessage): void => {
    process.send?.(message);
  };
  if (!process.send) throw new Error('this helper must be forked with an IPC channel');
  process.on('message', (message: RequestMessage) => {
    const handler = handlers[message.kind] as ((args: unknown) => unknown) | undefined;
    if (!handler) {
      send({ id: message.id, ok: false, error: `no answer for ${message.kind}` });
      return;
    }
    void Promise.resolve()
      .then(() => handler(message.args))
      .then(
        (result) => send({ id: message.id, ok: true, result: result ?? null }),
        (err: unknown) => send({ id: message.id, ok: false, error: (err as Error).stack ?? String(err) }),
      );
  });
  process.on('disconnect', () => process.exit(0));
  send({ ready: true, address });
}
