/**
 * Self-hosted billing (docs/spec.md §11, both transports): when the owner's preauth names
 * `CloudServiceForSelfHosted`, a `TrackSelfHostedExecuteWorkflow` stream is opened to it
 * beside the run's main stream, and every `trackLlmCallForSelfHosted` action is sent there
 * as a TrackSelfHostedClientEvent. As Workhorse's stream_manager does it, one event is
 * answered by one TrackSelfHostedAction, in order; only then is the action answered to the
 * workflow service (an empty plainTextResponse). A stream that fails fails every event
 * waiting on it and every later one.
 */
import type * as grpc from '@grpc/grpc-js';

export interface TrackEvent {
  requestID: string;
  workflowID: string;
  featureQualifiedName: string;
  featureAiCatalogItem: boolean;
}

export type BillingCall = grpc.ClientDuplexStream<TrackEvent, { requestID?: string }>;

export class BillingStream {
  private readonly waiting: Array<{ resolve(): void; reject(err: Error): void }> = [];
  private failure: Error | undefined;

  constructor(private readonly call: BillingCall) {
    call.on('data', () => this.waiting.shift()?.resolve());
    call.on('status', (status: grpc.StatusObject) => this.fail(new Error(`cloud service stream ended: ${status.details || status.code}`)));
    // Errors come through 'status' too; the listener keeps them from throwing.
    call.on('error', () => undefined);
  }

  /** Sends the event; resolves once the cloud service acknowledged it. Rejects when the stream cannot. */
  track(event: TrackEvent): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.call.write(event);
    });
  }

  /** The run has ended: the stream is half-closed (the cloud service ends it) and cancelled if it lingers. */
  close(): void {
    this.fail(new Error('the run has ended'));
    if (!this.call.writableEnded) this.call.end();
    setTimeout(() => this.call.cancel(), 1_000).unref();
  }

  private fail(err: Error): void {
    this.failure ??= err;
    for (const waiter of this.waiting.splice(0)) waiter.reject(this.failure);
  }
}
