/**
 * A gRPC call for tests of WorkflowStream and what decides a run's end: it records what is
 * written, takes each write when the test says so, and ends when the test (or cancel) says
 * so, as grpc-js reports it ('status' at once; an OK call's readable side ends just after).
 */
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import type { Action, ClientEvent } from '../../src/workflow/contract';
import type { CallHandle } from '../../src/workflow/workflow-stream';

export class FakeCall extends EventEmitter implements CallHandle {
  readonly written: ClientEvent[] = [];
  cancels = 0;
  paused = false;
  writableEnded = false;
  destroyed = false;
  /** Write callbacks not yet called: the test decides when the HTTP/2 stream takes a write. */
  readonly pendingWrites: Array<(err?: Error | null) => void> = [];

  write(event: ClientEvent, cb?: (err?: Error | null) => void): boolean {
    if (this.writableEnded) throw new Error('write after end');
    this.written.push(event);
    if (cb) this.pendingWrites.push(cb);
    return true;
  }

  pause(): this {
    this.paused = true;
    return this;
  }

  resume(): this {
    this.paused = false;
    return this;
  }

  /** Like grpc-js: a cancel ends the call with CANCELLED. */
  cancel(): void {
    this.cancels += 1;
    this.finish(grpc.status.CANCELLED, 'Cancelled on client');
  }

  /** Like grpc-js: the status is reported at once; an OK call's readable side ends just after. */
  finish(code: grpc.status, details = '', readEnds = true): void {
    this.writableEnded = true;
    this.emit('status', { code, details, metadata: new grpc.Metadata() });
    if (code === grpc.status.OK && readEnds) setImmediate(() => this.emit('end'));
  }

  action(action: Action): void {
    this.emit('data', action);
  }
}
