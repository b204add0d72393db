/**
 * A bare grpc-js client of the DuoWorkflow contract, for driving the workflow simulator
 * directly (and as the "raw grpc-js" baseline). It uses the same serializers the gateway
 * uses, so what it sends is what the gateway would send.
 */
import * as grpc from '@grpc/grpc-js';
import { duoWorkflowService, type Action, type ClientEvent } from '../../src/workflow/contract';

const method = duoWorkflowService['ExecuteWorkflow'] as grpc.MethodDefinition<ClientEvent, Action>;

export interface CallStatus {
  code: grpc.status;
  /** The status code's name, e.g. 'UNAVAILABLE'. */
  codeName: string;
  details: string;
}

/** One ExecuteWorkflow call: the actions received so far and the final status. */
export class WorkflowTestCall {
  readonly actions: Action[] = [];
  /** Resolves with the call's final status (never rejects). */
  readonly status: Promise<CallStatus>;
  private finalStatus: CallStatus | undefined;
  private readonly waiters = new Set<() => void>();

  constructor(private readonly stream: grpc.ClientDuplexStream<ClientEvent, Action>) {
    // A non-OK status is also emitted as 'error'; the status event carries it either way.
    stream.on('error', () => undefined);
    stream.on('data', (action: Action) => {
      this.actions.push(action);
      this.notify();
    });
    this.status = new Promise((resolve) => {
      stream.on('status', (s: grpc.StatusObject) => {
        this.finalStatus = { code: s.code, codeName: grpc.status[s.code] ?? String(s.code), details: s.details };
        this.notify();
        resolve(this.finalStatus);
      });
    });
  }

  /** The final status, or undefined while the call is open. */
  get ended(): CallStatus | undefined {
    return this.finalStatus;
  }

  send(event: ClientEvent): void {
    this.stream.write(event);
  }

  /** Half-closes the client side (no more events). */
  end(): void {
    this.stream.end();
  }

  cancel(): void {
    this.stream.cancel();
  }

  /** Resolves with the n-th action (0-based) once received; rejects if the call ends first or after timeoutMs. */
  async action(n: number, timeoutMs = 5_000): Promise<Action> {
    await this.until(() => this.actions.length > n || this.finalStatus !== undefined, timeoutMs, `action #${n}`);
    const action = this.actions[n];
    if (!action) throw new Error(`call ended (${this.finalStatus?.codeName}: ${this.finalStatus?.details}) before action #${n}`);
    return action;
  }

  private until(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (!predicate()) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      this.waiters.add(check);
    });
  }

  private notify(): void {
    for (const check of [...this.waiters]) check();
  }
}

/** A channel to one workflow service address (insecure, loopback). */
export class WorkflowTestClient {
  private readonly client: grpc.Client;
  private readonly calls = new Set<WorkflowTestCall>();

  constructor(address: string, options: grpc.ChannelOptions = {}) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure(), options);
  }

  /** Opens an ExecuteWorkflow call with `metadata` as request headers. */
  open(metadata: Record<string, string> = {}): WorkflowTestCall {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(metadata)) md.set(k, v);
    const stream = this.client.makeBidiStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, md);
    const call = new WorkflowTestCall(stream);
    this.calls.add(call);
    void call.status.then(() => this.calls.delete(call));
    return call;
  }

  /** Cancels every open call and closes the channel. */
  close(): void {
    for (const call of this.calls) call.cancel();
    this.client.close();
  }
}
