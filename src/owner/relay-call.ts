/**
 * One runHTTPRequest relayed to the owner (docs/spec.md §6), as an undici dispatch handler: the
 * answer's status, headers (canonical names, relayedResponseHeaders) and body up to the
 * cap are collected as undici reads them, and the call settles once with a RelayResult.
 *
 * Why a handler rather than `pool.request()`: that wraps every answer in a Readable body
 * stream, an AbortController-driven signal and a chain of promises, and builds a header
 * object that is then rebuilt under canonical names. This runs for every relayed action,
 * and that machinery was about a quarter of the gateway's CPU in the relay benchmark. The
 * handler uses undici's core callbacks (onConnect/onHeaders/onData/onComplete/onError),
 * which undici's own api-request uses, so no adapter sits in between.
 */
import type { Dispatcher } from 'undici';
import type { RelayErrorType } from '../vocabulary';
import { follow } from '../shared/deadline';
import { relayedResponseHeaders } from './http-headers';
import { isTimeoutError, networkErrorText } from './network-errors';

/** An owner answer as HttpResponse carries it: canonical header names (docs/spec.md §6). */
export interface RelayAnswer {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

export type RelayResult =
  | ({ ok: true } & RelayAnswer)
  /** A body over the cap keeps its answer (status, headers, the body up to the cap) beside the error. */
  | ({ ok: false; error: string; type: RelayErrorType } & Partial<RelayAnswer>);

const ABORTED: RelayResult = Object.freeze({ ok: false, type: 'aborted', error: 'request aborted' });
const TIMED_OUT: RelayResult = Object.freeze({ ok: false, type: 'timeout', error: 'request timed out' });

/** The error undici's request is ended with (its text is never shown: the call has settled). */
const CALL_ENDED = Object.freeze(new Error('relay call ended'));

/** `buf` without a trailing, incomplete UTF-8 sequence (a body cut at the cap may end mid-character). */
export function wholeCharacters(buf: Buffer): Buffer {
  let lead = buf.length - 1;
  while (lead >= 0 && buf.length - lead <= 3 && ((buf[lead] as number) & 0xc0) === 0x80) lead -= 1;
  if (lead < 0) return buf;
  const first = buf[lead] as number;
  const width = first >= 0xf0 ? 4 : first >= 0xe0 ? 3 : first >= 0xc0 ? 2 : 1;
  return buf.length - lead < width ? buf.subarray(0, lead) : buf;
}

export interface RelayCallOptions {
  /** The run's signal: aborting it answers "request aborted". Must not be aborted yet. */
  signal: AbortSignal;
  /** The whole call's deadline ("request timed out"); none when undefined. */
  timeoutMs: number | undefined;
  /** Bytes of body kept; past them the answer is "response body exceeded size limit". */
  bodyLimit: number;
  /** host:port of the owner, for network error texts. */
  target: string;
}

/**
 * Dispatch with `pool.dispatch(options, call)`, then await `call.result`. Never rejects.
 * The call settles at the first of: the whole answer, the body cap, an error, the
 * deadline, the run's abort; whatever undici still reports after that is ignored.
 */
export class RelayCall implements Dispatcher.DispatchHandler {
  readonly result: Promise<RelayResult>;
  private resolve!: (result: RelayResult) => void;
  private settled = false;
  /** Ends the request in undici (set once it is written to a connection). */
  private abortRequest: ((err: Error) => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly unfollow: () => void;
  private statusCode = 0;
  private headers: Record<string, string> = {};
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly options: RelayCallOptions) {
    this.result = new Promise((resolve) => (this.resolve = resolve));
    this.unfollow = follow(options.signal, () => this.finish(ABORTED));
    if (options.timeoutMs !== undefined) {
      this.timer = setTimeout(() => this.finish(TIMED_OUT), options.timeoutMs);
      // A pending deadline alone does not keep the process alive.
      this.timer.unref();
    }
  }

  onConnect(abort: (err?: Error) => void): void {
    // Settled while queued for a connection (deadline, run ended): never sent.
    if (this.settled) abort(CALL_ENDED);
    else this.abortRequest = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    // 1xx informational answers precede the real one.
    if (statusCode < 200 || this.settled) return true;
    this.statusCode = statusCode;
    this.headers = relayedResponseHeaders(rawHeaders);
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.settled) return true;
    const limit = this.options.bodyLimit;
    if (this.size + chunk.length <= limit) {
      this.size += chunk.length;
      this.chunks.push(chunk);
      return true;
    }
    // Over the cap: keep what fits, drop the connection (the rest is not read).
    this.chunks.push(chunk.subarray(0, limit - this.size));
    const overflow = this.size + chunk.length;
    this.finish({ ok: false, type: 'too_large', error: `response body exceeded size limit (${limit} bytes)`, ...this.answer(overflow) });
    return false;
  }

  onComplete(): void {
    this.finish({ ok: true, ...this.answer(0) });
  }

  onError(err: Error): void {
    if (this.settled) return;
    if (this.options.signal.aborted) this.finish(ABORTED);
    else if (isTimeoutError(err)) this.finish(TIMED_OUT);
    else this.finish({ ok: false, type: 'network', error: networkErrorText(err, this.options.target) });
  }

  private answer(overflow: number): RelayAnswer {
    const { chunks } = this;
    const data = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    return { statusCode: this.statusCode, headers: this.headers, body: (overflow ? wholeCharacters(data) : data).toString('utf8') };
  }

  /** Settles once: the timer and the run's signal are let go, an unfinished request is ended. */
  private finish(result: RelayResult): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.unfollow();
    if (!result.ok) this.abortRequest?.(CALL_ENDED);
    this.resolve(result);
  }
}
