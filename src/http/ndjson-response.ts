/**
 * The blocking-mode response (SPEC §3a): application/x-ndjson, status 200 committed
 * lazily on the first line, an empty line every keepaliveMs. Lines are written whole, so
 * a caller never sees half a line.
 */
import type { Response } from 'express';

export class NdjsonResponse {
  private keepalive: NodeJS.Timeout | undefined;
  private finished = false;

  constructor(
    private readonly res: Response,
    keepaliveMs: number,
  ) {
    this.keepalive = setInterval(() => this.write(''), keepaliveMs);
  }

  /** True once the 200 is on the wire; after that a failure can only end the stream. */
  get committed(): boolean {
    return this.res.headersSent;
  }

  writeLine(value: unknown): void {
    this.write(JSON.stringify(value));
  }

  private write(line: string): void {
    if (this.finished || this.res.writableEnded || this.res.destroyed) return;
    if (!this.res.headersSent) {
      this.res.status(200);
      this.res.setHeader('Content-Type', 'application/x-ndjson');
      this.res.setHeader('Cache-Control', 'no-cache');
      this.res.setHeader('X-Accel-Buffering', 'no');
    }
    this.res.write(`${line}\n`);
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
      this.res.status(200);
      this.res.setHeader('Content-Type', 'application/x-ndjson');
    }
    this.res.end();
  }
}
