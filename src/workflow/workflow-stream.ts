/**
 * One ExecuteWorkflow call seen from the client side: sends events, hands each Action to
 * the run, and performs the stop handshake (docs/spec.md §4): send stopWorkflow, wait until the
 * call ends — UNAVAILABLE (the shutdown's ack) or OK (every other stop's) — or the ack
 * timeout, then cancel.
 *
 * Reading can be paused (a slow blocking caller): grpc-js then stops asking the HTTP/2
 * stream for messages and flow control slows the service. Because grpc-js reports an OK
 * status as soon as the last message is in the readable buffer, a call that ended OK is
 * over only once that buffer has been read ('end'): no checkpoint is dropped.
 */
import * as grpc from '@grpc/grpc-js';
import type { Action, ActionResponse, ClientEvent, StartWorkflowRequest } from './contract';

/**
 * How a stop handshake ended (docs/spec.md §4): `ack`, the call ended with the status the
 * service acknowledges that word with (UNAVAILABLE for WORKHORSE_SERVER_SHUTDOWN, OK for
 * every other); `error`, any other status; `timeout`, cancelled after the ack timeout;
 * `already_ended`, the call had ended before the stop could be written.
 */
export const stopOutcomes = ['ack', 'already_ended', 'timeout', 'error'] as const;
export type StopOutcome = (typeof stopOutcomes)[number];

export interface StreamEnd {
  code: grpc.status;
  details: string;
}

type StreamState = 'open' | 'stopping' | 'ended';

/**
 * What a WorkflowStream needs of its gRPC call: a grpc-js ClientDuplexStream has it
 * (channel-pool.ts opens one), and tests drive the stream with a fake.
 */
export interface CallHandle {
  on(event: 'data', listener: (action: Action) => void): unknown;
  on(event: 'status', listener: (status: grpc.StatusObject) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  /** `cb` runs once the event is written to the HTTP/2 stream (an error: it was not). */
  write(event: ClientEvent, cb?: (err?: Error | null) => void): boolean;
  cancel(): void;
  pause(): unknown;
  resume(): unknown;
  readonly writableEnded: boolean;
  readonly destroyed: boolean;
}

export class WorkflowStream {
  private state: StreamState = 'open';
  /** The call's final status, once received (an OK one waits for the last message to be read). */
  private status: StreamEnd | undefined;
  private readEnded = false;
  /**
   * Whether a stop reached the wire before the service's end was read: 'written' once
   * stopWorkflow's write completed while the call was still open. A stop still queued, or
   * whose write failed, when the end came could not have been seen by the service.
   */
  private stopDelivery: 'none' | 'queued' | 'written' | 'unsent' = 'none';
  private resolveEnded!: (end: StreamEnd) => void;
  /** The startRequest's outcome, while it is being written (sendStart). */
  private startWaiter: ((outcome: 'written' | 'ended') => void) | undefined;
  /** Resolves once, when the call has ended (with its final status). Never rejects. */
  readonly ended: Promise<StreamEnd> = new Promise((resolve) => (this.resolveEnded = resolve));

  constructor(
    private readonly call: CallHandle,
    onAction: (action: Action) => void,
  ) {
    call.on('data', (action: Action) => {
      if (this.state === 'ended') return;
      onAction(action);
    });
    call.on('status', (status: grpc.StatusObject) => {
      this.status ??= { code: status.code, details: status.details };
      if (this.stopDelivery === 'queued') this.stopDelivery = 'unsent';
      if (status.code !== grpc.status.OK || this.readEnded) this.finish(this.status);
    });
    call.on('end', () => {
      this.readEnded = true;
      if (this.status) this.finish(this.status);
    });
    // Errors are delivered through 'status' too; the listener keeps them from throwing.
    call.on('error', () => undefined);
  }

  private finish(end: StreamEnd): void {
    if (this.state === 'ended') return;
    this.state = 'ended';
    this.startWaiter?.('ended');
    this.startWaiter = undefined;
    this.resolveEnded(end);
  }

  private write(event: ClientEvent, cb?: (err?: Error | null) => void): boolean {
    if (this.state === 'ended' || this.call.writableEnded || this.call.destroyed) return false;
    this.call.write(event, cb);
    return true;
  }

  /**
   * Sends the startRequest. Resolves 'written' once it is on an open HTTP/2 stream (a
   * call still waiting for a connection has sent nothing), or 'ended' when the call ended
   * first; never rejects.
   */
  sendStart(request: StartWorkflowRequest): Promise<'written' | 'ended'> {
    return new Promise((resolve) => {
      this.startWaiter = resolve;
      const sent = this.write({ startRequest: request }, (err) => {
        this.startWaiter = undefined;
        resolve(err ? 'ended' : 'written');
      });
      if (!sent) {
        this.startWaiter = undefined;
        resolve('ended');
      }
    });
  }

  /** Stops reading messages (the caller cannot take more yet). */
  pause(): void {
    this.call.pause();
  }

  resume(): void {
    this.call.resume();
  }

  /** Writes any event (a WebSocket client's, passed on) if the call can still take it. */
  send(event: ClientEvent): boolean {
    return this.write(event);
  }

  /** Writes an ActionResponse if the call can still take it. */
  respond(response: ActionResponse): boolean {
    return this.write({ actionResponse: response });
  }

  /**
   * True once a stopWorkflow has been handed to the call: whatever is written after it
   * reaches the service behind the stop, and a service that reads its stream in order
   * stops there without reading it.
   */
  get stopSent(): boolean {
    return this.stopDelivery !== 'none';
  }

  /**
   * True when a stopWorkflow was on the wire before the service's end was read, so the
   * service may have ended because of it; false when the end came first (the stop was
   * still queued, its write failed, or it was never written because the end was in).
   */
  get stopReachedService(): boolean {
    return this.stopDelivery === 'written';
  }

  /**
   * The stop handshake: sends `reason`, then waits for the call's end. Resolves with how it
   * ended — `ack` when the status is `ack` (the one the service acknowledges that word
   * with: UNAVAILABLE for WORKHORSE_SERVER_SHUTDOWN, OK for every other), `error` for any
   * other; the call is ended in every case (cancelled after `ackTimeoutMs` without an
   * answer). A call whose final status is already in is not sent the stop: the service
   * ended before it could see one.
   */
  async stop(reason: string, ack: grpc.status, ackTimeoutMs: number): Promise<StopOutcome> {
    if (this.state === 'ended' || this.status) return 'already_ended';
    if (this.state === 'stopping') {
      await this.ended;
      return 'already_ended';
    }
    this.stopDelivery = 'queued';
    const sent = this.write({ stopWorkflow: { reason } }, (err) => {
      if (this.stopDelivery === 'queued') this.stopDelivery = err ? 'unsent' : 'written';
    });
    if (!sent) this.stopDelivery = 'unsent';
    this.state = 'stopping';
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ackTimeoutMs)));
    const result = await Promise.race([this.ended, timedOut]);
    clearTimeout(timer);
    if (result === 'timeout') {
      this.cancel();
      return 'timeout';
    }
    return result.code === ack ? 'ack' : 'error';
  }

  /**
   * Cancels the call at once (caller hung up, or the handshake timed out). A call whose
   * OK status is in but whose last messages were never read ends now with that status.
   */
  cancel(): void {
    if (this.state === 'ended') return;
    if (this.status) this.finish(this.status);
    else this.call.cancel();
  }
}
