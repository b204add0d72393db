/**
 * One call to the owner service as an undici dispatch handler: the answer's status, raw
 * headers and body up to a limit are collected as undici reads them, and the call
 * settles once with how it ended. The preauth, every relayed runHTTPRequest and every
 * segment-end callback go through here.
 *
 * Why a handler rather than `pool.request()`: that wraps every answer in a Readable body
 * stream, an AbortController-driven signal (an 'abort' listener on the caller's signal
 * per request) and a chain of promises, and builds a header object. For the relay that
 * machinery was about a quarter of the gateway's CPU; for an accepted execute (a preauth
 * and a segment-end callback) it was most of undici's share. The handler uses undici's
 * core callbacks (onConnect/onHeaders/onData/onComplete/onError), which undici's own
 * api-request uses, so no adapter sits in between.
 */
import type { Dispatcher } from 'undici';
import { follow } from '../core/deadline';
import { isTimeoutError } from './network-errors';

/** How a call ended. `answered`: the answer's headers had come when it failed. */
export type CallEnd =
  | {
      kind: 'answer';
      statusCode: number;
      /** As undici read them: name, value, name, value, … */
      rawHeaders: Buffer[];
      body: Buffer;
      /** The body went past its limit: `body` holds its first `limit` bytes, the rest was not read. */
      overflow: boolean;
    }
  | { kind: 'aborted'; answered: boolean }
  | { kind: 'timeout'; answered: boolean }
  | { kind: 'network'; error: Error; answered: boolean };

export interface OwnerCallOptions {
  /** Aborting it ends the call ('aborted'). Must not be aborted yet. */
  signal?: AbortSignal | undefined;
  /** The whole call's deadline ('timeout'); none when undefined (undici's own timeouts may still apply). */
  timeoutMs?: number | undefined;
  /** Bytes of body kept, by status; past them the call ends with `overflow`. */
  bodyLimit(statusCode: number): number;
}

/** The error undici's request is ended with (its text is never shown: the call has settled). */
const CALL_ENDED = Object.freeze(new Error('owner call ended'));

/**
 * Dispatch with `pool.dispatch(options, call)`, then await `call.ended`. Never rejects.
 * The call settles at the first of: the whole answer, the body limit, an error, the
 * deadline, the signal's abort; whatever undici still reports after that is ignored.
 */
export class OwnerCall implements Dispatcher.DispatchHandler {
  readonly ended: Promise<CallEnd>;
  private resolve!: (end: CallEnd) => void;
  private settled = false;
  /** Ends the request in undici (set once it is written to a connection). */
  private abortRequest: ((err: Error) => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly unfollow: (() => void) | undefined;
  private statusCode = 0;
  private rawHeaders: Buffer[] = [];
  private limit = 0;
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly options: OwnerCallOptions) {
    this.ended = new Promise((resolve) => (this.resolve = resolve));
    this.unfollow = options.signal && follow(options.signal, () => this.finish({ kind: 'aborted', answered: this.answered }));
    if (options.timeoutMs !== undefined) {
      this.timer = setTimeout(() => this.finish({ kind: 'timeout', answered: this.answered }), options.timeoutMs);
      // A pending deadline alone does not keep the process alive.
      this.timer.unref();
    }
  }

  private get answered(): boolean {
    return this.statusCode !== 0;
  }

  onConnect(abort: (err?: Error) => void): void {
    // Settled while queued for a connection (deadline, caller gone): never sent.
    if (this.settled) abort(CALL_ENDED);
    else this.abortRequest = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    // 1xx informational answers precede the real one.
    if (statusCode < 200 || this.settled) return true;
    this.statusCode = statusCode;
    this.rawHeaders = rawHeaders;
    this.limit = this.options.bodyLimit(statusCode);
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.settled) return true;
    if (this.size + chunk.length <= this.limit) {
      this.size += chunk.length;
      this.chunks.push(chunk);
      return true;
    }
    // Over the limit: keep what fits, drop the connection (the rest is not read).
    this.chunks.push(chunk.subarray(0, this.limit - this.size));
    this.finish(this.answer(true));
    return false;
  }

  onComplete(): void {
    this.finish(this.answer(false), true);
  }

  onError(err: Error): void {
    const { answered } = this;
    if (this.options.signal?.aborted) this.finish({ kind: 'aborted', answered });
    else if (isTimeoutError(err)) this.finish({ kind: 'timeout', answered });
    else this.finish({ kind: 'network', error: err, answered });
  }

  private answer(overflow: boolean): CallEnd {
    const { chunks } = this;
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    return { kind: 'answer', statusCode: this.statusCode, rawHeaders: this.rawHeaders, body, overflow };
  }

  /** Settles once: the timer and the signal are let go, an unfinished request is ended. */
  private finish(end: CallEnd, complete = false): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.unfollow?.();
    if (!complete) this.abortRequest?.(CALL_ENDED);
    this.resolve(end);
  }
}
