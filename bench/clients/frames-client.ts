/**
 * The client side of ws_frames (scenarios/ws-frames.ts): one WebSocket session whose turn
 * the scenario steps through in phases, and everything that crossed its sockets.
 *
 * The turn holds at *hold actions*: client actions reading `hold:<name>`, which the client
 * leaves unanswered until the scenario releases them, so every session of a phase waits at
 * the same point while a phase's meters are read. Every other client action is answered
 * at once (ANSWER, what the turn's `client` steps expect); checkpoints are only counted.
 * The session may move to another replica at a hold: its socket is dropped without a
 * close frame (the run parks on its holder) and a new one re-attaches with the resume
 * start, whose first frame is the hold again (replayed: it was not answered).
 *
 * Counted per session, over every socket it opened: frames and payload bytes each way,
 * and the sockets' own bytes (net.Socket bytesRead / bytesWritten: WebSocket framing,
 * the upgrade and the close included). Loopback only; close() ends every socket opened.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { WEBSOCKET_PATH } from '../../src/websocket/route';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { ANSWER } from './resume-client';

const HOLD_PREFIX = 'hold:';

/** A `client` step the client leaves unanswered until the scenario releases `name`. */
export function holdStep(name: string): Step {
  return { op: 'client', action: { runReadFile: { filepath: `${HOLD_PREFIX}${name}` } }, expect: ANSWER };
}

/** A `client` step the client answers as soon as it arrives. */
export const answeredStep: Step = { op: 'client', action: { runReadFile: { filepath: 'frame.txt' } }, expect: ANSWER };

/** What crossed a session's sockets so far (the scenario takes differences over a phase). */
export interface FrameCounts {
  framesIn: number;
  checkpointsIn: number;
  payloadIn: number;
  framesOut: number;
  payloadOut: number;
  /** Bytes the sockets read and wrote (TCP payload: frames with their headers, the upgrade, the close). */
  wireIn: number;
  wireOut: number;
}

export function addCounts(a: FrameCounts, b: FrameCounts, sign = 1): FrameCounts {
  const out = { ...a };
  for (const key of Object.keys(out) as Array<keyof FrameCounts>) out[key] += sign * b[key];
  return out;
}

export const zeroCounts: Readonly<FrameCounts> = Object.freeze({ framesIn: 0, checkpointsIn: 0, payloadIn: 0, framesOut: 0, payloadOut: 0, wireIn: 0, wireOut: 0 });

interface Waiter {
  /** undefined: any hold. */
  name: string | undefined;
  resolve(): void;
  reject(err: Error): void;
}

/** How long a re-attach refused 1013 is retried (the holder may not have seen the drop yet); then the move fails. */
const MOVE_RETRY_BUDGET_MS = 2_000;
const MOVE_RETRY_DELAY_MS = 20;

export class FrameSession {
  private ws: WebSocket | undefined;
  private readonly sockets: Socket[] = [];
  private readonly opened: WebSocket[] = [];
  private counts: FrameCounts = { ...zeroCounts };
  /** The hold the service is waiting on, if any: its name and requestID. */
  private held: { name: string; requestID: string } | undefined;
  private waiter: Waiter | undefined;
  private closedWith: { code: number; reason: string } | undefined;
  private onClosed: (() => void) | undefined;
  /** Sockets opened, re-attaches included. */
  socketCount = 0;

  constructor(readonly workflowId: string) {}

  /** Connects to `baseUrl`, sends the turn's startRequest and resolves at the turn's first hold. */
  async start(baseUrl: string, steps: Step[], timeoutMs: number): Promise<void> {
    await this.connect(baseUrl);
    this.send({ startRequest: { workflowID: this.workflowId, goal: 'bench', workflowMetadata: scenarioMetadata(steps) } });
    await this.hold(undefined, timeoutMs);
  }

  /**
   * At a hold: drops the socket without a close frame and re-attaches on `baseUrl` with the
   * resume start (retried after a 1013 for MOVE_RETRY_BUDGET_MS); resolves once the hold
   * is replayed there. Resolves with the refusals retried.
   */
  async moveTo(baseUrl: string, timeoutMs: number): Promise<number> {
    const held = this.held;
    if (!held) throw new Error(`${this.workflowId}: moveTo outside a hold`);
    const retryUntil = performance.now() + MOVE_RETRY_BUDGET_MS;
    let retries = 0;
    this.ws?.terminate();
    for (;;) {
      this.held = undefined;
      await this.connect(baseUrl);
      this.send({ startRequest: { workflowID: this.workflowId, goal: '' } });
      try {
        await this.hold(held.name, timeoutMs);
        const replayed = this.heldRequestId();
        if (replayed !== held.requestID) throw new Error(`${this.workflowId}: re-attached to #${replayed}, not the hold #${held.requestID}`);
        return retries;
      } catch (err) {
        if (this.closedWith?.code !== 1013 || performance.now() > retryUntil) throw err;
        retries += 1;
        await sleep(MOVE_RETRY_DELAY_MS);
      }
    }
  }

  /**
   * Resolves once the service's hold `name` (undefined: any) has arrived, at once if it is
   * held now; rejects on a close or after timeoutMs.
   */
  hold(name: string | undefined, timeoutMs: number): Promise<void> {
    if (this.held && (name === undefined || this.held.name === name)) return Promise.resolve();
    if (this.closedWith) return Promise.reject(this.closedError(name));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.settle(new Error(`${this.workflowId}: no hold ${name ?? ''} within ${timeoutMs} ms (${this.counts.framesIn} frames in)`)), timeoutMs);
      this.waiter = {
        name,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
    });
  }

  /** Answers the hold `name` (the service goes on). */
  release(name: string): void {
    const held = this.held;
    if (held?.name !== name) throw new Error(`${this.workflowId}: release ${name}, but ${held ? `held at ${held.name}` : 'not held'}`);
    this.held = undefined;
    this.answer(held.requestID);
  }

  /** Resolves with the close code once the current socket has closed (the turn's end: 1000), or rejects after timeoutMs. */
  async ended(timeoutMs: number): Promise<number> {
    if (!this.closedWith) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve, reject) => {
        this.onClosed = resolve;
        timer = setTimeout(() => reject(new Error(`${this.workflowId}: not closed within ${timeoutMs} ms`)), timeoutMs);
      }).finally(() => clearTimeout(timer));
    }
    return this.closedWith?.code ?? 0;
  }

  /** The requestID of the hold the service waits on now. */
  heldRequestId(): string | undefined {
    return this.held?.requestID;
  }

  /** The name of the hold the service waits on now. */
  heldAt(): string | undefined {
    return this.held?.name;
  }

  /** Counts so far, over every socket opened. */
  snapshot(): FrameCounts {
    const wire = this.sockets.reduce((n, s) => ({ in: n.in + s.bytesRead, out: n.out + s.bytesWritten }), { in: 0, out: 0 });
    return { ...this.counts, wireIn: wire.in, wireOut: wire.out };
  }

  /** Ends every socket this session opened. */
  close(): void {
    for (const ws of this.opened) ws.terminate();
  }

  private connect(baseUrl: string): Promise<void> {
    const url = new URL(baseUrl);
    if (url.hostname !== '127.0.0.1') throw new Error(`load generators only target 127.0.0.1, not ${baseUrl}`);
    const ws = new WebSocket(`ws://${url.host}${WEBSOCKET_PATH}`, { perMessageDeflate: false });
    this.ws = ws;
    this.opened.push(ws);
    this.socketCount += 1;
    this.closedWith = undefined;
    ws.on('upgrade', (res: IncomingMessage) => this.sockets.push(res.socket));
    ws.on('message', (data: Buffer, isBinary: boolean) => this.frame(ws, data, isBinary));
    ws.on('error', () => undefined);
    ws.once('close', (code: number, reason: Buffer) => {
      if (this.ws !== ws) return;
      this.closedWith = { code, reason: reason.toString('utf8') };
      this.settle(this.closedError(this.waiter?.name));
      this.onClosed?.();
    });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (_req, res: IncomingMessage) => {
        res.resume();
        ws.terminate();
        reject(new Error(`${this.workflowId}: upgrade refused ${res.statusCode ?? 0}`));
      });
      ws.once('close', () => reject(new Error(`${this.workflowId}: socket closed before it opened`)));
    });
  }

  private frame(ws: WebSocket, data: Buffer, isBinary: boolean): void {
    if (this.ws !== ws) return;
    this.counts.framesIn += 1;
    this.counts.payloadIn += data.length;
    if (!isBinary) return;
    const frame = JSON.parse(data.toString('utf8')) as { requestID?: string; newCheckpoint?: unknown; runReadFile?: { filepath?: string } };
    if (frame.newCheckpoint !== undefined) {
      this.counts.checkpointsIn += 1;
      return;
    }
    const requestID = frame.requestID ?? '';
    const file = frame.runReadFile?.filepath ?? '';
    if (!file.startsWith(HOLD_PREFIX)) {
      this.answer(requestID);
      return;
    }
    this.held = { name: file.slice(HOLD_PREFIX.length), requestID };
    if (this.waiter && (this.waiter.name === undefined || this.waiter.name === this.held.name)) this.settle();
  }

  private answer(requestID: string): void {
    this.send({ actionResponse: { requestID, ...ANSWER } });
  }

  private send(event: unknown): void {
    const ws = this.ws;
    if (!ws || ws.readyState !== ws.OPEN) return;
    const text = JSON.stringify(event);
    this.counts.framesOut += 1;
    this.counts.payloadOut += Buffer.byteLength(text);
    ws.send(text);
  }

  private settle(err?: Error): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    if (err) waiter?.reject(err);
    else waiter?.resolve();
  }

  private closedError(name: string | undefined): Error {
    const closed = this.closedWith;
    return new Error(`${this.workflowId}: socket closed ${closed?.code ?? '?'} ${JSON.stringify(closed?.reason ?? '')}${name ? ` waiting for hold ${name}` : ''}`);
  }
}
