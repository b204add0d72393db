/**
 * The blocking-mode response (docs/spec.md §3a): application/x-ndjson, status 200 committed
 * lazily on the first line, an empty line every keepaliveMs once the stream is open.
 * Lines are written whole, so a caller never sees half a line. It is the run's
 * checkpoint sink: each checkpoint Action becomes one line as Workhorse writes it (proto
 * names, unpopulated fields emitted: workflow/action-line.ts), and `write` tells
 * the run when the socket is full (res.write() returned false: the run pauses the
 * service until 'drain') or gone (the run ends). What one caller holds buffered is so
 * bounded by the socket's high-water mark plus one line (one Action, at most 4 MiB).
 */
import type { ServerResponse } from 'node:http';
import type { ActionSink } from '../run/run';
import { workhorseActionJson } from '../workflow/action-line';
import type { Action } from '../workflow/contract';

export class NdjsonResponse implements ActionSink {
  private keepalive: NodeJS.Timeout | undefined;
  private finished = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly keepaliveMs: number,
  ) {}

  /** True once the 200 is on the wire; after that a failure can only end the stream. */
  get committed(): boolean {
    return this.res.headersSent;
  }

  /**
   * Starts the keepalive lines. Called once the run is open: before that a failure must
   * still be a real status, which a keepalive line would have committed away.
   */
  keepAlive(): void {
    if (this.finished || this.keepalive) return;
    this.keepalive = setInterval(() => this.keepaliveLine(), this.keepaliveMs);
  }

  write(action: Action): 'ok' | 'full' | 'gone' {
    return this.writeText(JSON.stringify(workhorseActionJson(action)));
  }

  drained(): Promise<void> {
    if (!this.res.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        this.res.off('drain', done);
        this.res.off('close', done);
        resolve();
      };
      this.res.on('drain', done);
      this.res.on('close', done);
    });
  }

  private writeText(line: string): 'ok' | 'full' | 'gone' {
    if (this.finished || this.res.writableEnded || this.res.destroyed) return 'gone';
    if (!this.res.headersSent) {
      this.res.statusCode = 200;
      this.res.setHeader('Content-Type', 'application/x-ndjson');
      this.res.setHeader('Cache-Control', 'no-cache');
      this.res.setHeader('X-Accel-Buffering', 'no');
    }
    return this.res.write(`${line}\n`) ? 'ok' : 'full';
  }

  /** A keepalive line goes out only when the socket has room: it must not add to a backlog. */
  private keepaliveLine(): void {
    if (!this.res.writableNeedDrain) this.writeText('');
  }

  /** Stops the keepalive; the caller then ends or errors the response. Idempotent. */
  stop(): void {
    this.finished = true;
    clearInterval(this.keepalive);
    this.keepalive = undefined;
  }

  /** Ends a committed stream (or an uncommitted one as an empty 200). */
  end(): void {
    this.stop();
    if (this.res.writableEnded || this.res.destroyed) return;
    if (!this.res.headersSent) {
      this.res.statusCode = 200;
      this.res.setHeader('Content-Type', 'application/x-ndjson');
    }
    this.res.end();
  }
}
