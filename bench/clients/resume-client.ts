/**
 * The client side of ws_resume (scenarios/ws-resume.ts): one WebSocket session of a turn
 * of client-executed actions, answered as soon as each arrives, whose socket is dropped
 * (terminate: no close frame, so the gateway parks the run) with one action left
 * unanswered, then re-attached — to the replica holding the run or to another — with the
 * resume start a client sends (`{startRequest:{workflowID, goal:''}}`). It records, per
 * session, everything the lead's figures are made of: each re-attach's latency (loss →
 * first frame on the new socket) and where its two sockets were, each action's round trip
 * (answer sent → next action received) and which path it took, and every requestID
 * delivered on every socket. Loopback only; every socket it opens is closed by its end.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { WEBSOCKET_PATH } from '../../src/websocket/route';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';

/** Where a re-attach's lost socket and new socket were, relative to the replica holding the run. */
export const reattachKinds = ['local', 'bridged', 'return', 'rebridge'] as const;
export type ReattachKind = (typeof reattachKinds)[number];

export function reattachKind(fromHolder: boolean, toHolder: boolean): ReattachKind {
  if (fromHolder) return toHolder ? 'local' : 'bridged';
  return toHolder ? 'return' : 'rebridge';
}

/** The answer every action of the turn expects (the simulator checks it). */
export const ANSWER = { plainTextResponse: { response: 'ok' } };

/** A turn of `actions` client-executed actions, each awaited by the service, then the end. */
export function turnSteps(actions: number): Step[] {
  return [{ op: 'repeat', times: actions, steps: [{ op: 'client', action: { runReadFile: { filepath: 'resume.txt' } }, expect: ANSWER }] }];
}

type ConnEvent =
  | { kind: 'frame'; requestID: string; at: number }
  | { kind: 'close'; code: number; reason: string; at: number }
  | { kind: 'refused'; status: number; at: number }
  | { kind: 'timeout'; at: number };

/** One client socket: its frames and its end as a queue of events, read in order. */
class Conn {
  private readonly events: ConnEvent[] = [];
  private wake: (() => void) | undefined;
  private ended = false;

  constructor(
    readonly ws: WebSocket,
    /** The bench's number for this socket (deliveries are recorded per socket). */
    readonly socket: number,
    /** The gateway (index) it is connected to. */
    readonly replica: number,
  ) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      const at = performance.now();
      if (!isBinary) return;
      const frame = JSON.parse(data.toString('utf8')) as { requestID?: string };
      this.push({ kind: 'frame', requestID: frame.requestID ?? '', at });
    });
    ws.on('unexpected-response', (_req, res) => {
      this.push({ kind: 'refused', status: res.statusCode ?? 0, at: performance.now() });
      res.resume();
      ws.terminate();
    });
    ws.on('error', () => undefined);
    ws.once('close', (code: number, reason: Buffer) => this.push({ kind: 'close', code, reason: reason.toString('utf8'), at: performance.now() }));
  }

  private push(event: ConnEvent): void {
    if (this.ended) return;
    if (event.kind !== 'frame') this.ended = true;
    this.events.push(event);
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** The next event, or a timeout after `timeoutMs`. */
  async next(timeoutMs: number): Promise<ConnEvent> {
    const deadline = performance.now() + timeoutMs;
    while (this.events.length === 0) {
      const left = deadline - performance.now();
      if (left <= 0) return { kind: 'timeout', at: performance.now() };
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        timer = setTimeout(resolve, left);
      });
      clearTimeout(timer);
    }
    return this.events.shift() as ConnEvent;
  }

  send(event: unknown): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify(event));
  }
}

export interface ReattachSample {
  kind: ReattachKind;
  ms: number;
  /** Connections refused 1013 before this one attached (the gateway had not parked the run yet). */
  retries: number;
  /** Whether the first frame on the new socket was the action left unanswered. */
  replayedUnanswered: boolean;
}

/** What one session saw. */
export interface SessionRecord {
  workflowId: string;
  holder: number;
  reattaches: ReattachSample[];
  /** Round trips (ms) by path: the socket on the holder (direct) or on another replica (bridged). */
  rtt: { direct: number[]; bridged: number[] };
  /** Every requestID delivered, with the socket it came on, in order. */
  deliveries: Array<{ socket: number; requestID: string }>;
  /** Answers this client sent, by requestID. */
  answersSent: Map<string, number>;
  /** Reconnects after the gateway closed the socket 1012 (a bridge given up): from the close to the first frame. */
  recoveries: Array<{ ms: number; retries: number }>;
  /** Re-attaches on another replica closed 1012 (its claim to the holder unanswered), then made on the holder. */
  reattachesClosed1012: number;
  /** Re-attaches on another replica that were refused 1013 until the retry budget ran out (the bridge is missing). */
  bridgeRefusals: Array<{ code: number; reason: string }>;
  /** From the first socket's connect to its first action (a fresh start: lock, stream, the service's start). */
  firstFrameMs: number;
  /** From the first socket's connect to the turn's close. */
  turnMs: number;
  /** How the last socket closed (1000: the turn ended), or why the session gave up. */
  end: string;
  errors: string[];
}

export interface SessionPlan {
  workflowId: string;
  /** Gateway base URLs (http://127.0.0.1:port), by index. */
  gateways: readonly string[];
  /** The gateway the session starts on: it holds the run. */
  holder: number;
  /** Actions in the turn. */
  actions: number;
  /** After how many distinct actions each drop happens, and the gateway the re-attach goes to. */
  drops: ReadonlyArray<{ afterActions: number; to: number }>;
  /** How long a 1013 on a re-attach is retried (the gateway may not have parked the run yet). */
  retryBudgetMs: number;
  /** The whole session's deadline. */
  deadline: number;
  /** Shared across sessions: set once another replica refused a re-attach for the whole budget; later drops go to the holder. */
  bridge: { unavailable: boolean };
}

const RETRY_DELAY_MS = 20;
/** What the gateway closes a socket with when the client should reconnect (a bridge given up, a socket-only drain). */
const RECONNECT_CODE = 1012;
/** Reconnects after 1012 a session makes before it counts as failed. */
const MAX_RECOVERIES = 5;
/** How long one socket waits for its next event before the session gives up on it. */
const EVENT_TIMEOUT_MS = 10_000;

function openConn(baseUrl: string, socket: number, replica: number): Conn {
  const url = new URL(baseUrl);
  if (url.hostname !== '127.0.0.1') throw new Error(`load generators only target 127.0.0.1, not ${baseUrl}`);
  return new Conn(new WebSocket(`ws://${url.host}${WEBSOCKET_PATH}`, { perMessageDeflate: false }), socket, replica);
}

function whenOpen(conn: Conn): Promise<boolean> {
  if (conn.ws.readyState === conn.ws.OPEN) return Promise.resolve(true);
  return new Promise((resolve) => {
    conn.ws.once('open', () => resolve(true));
    conn.ws.once('close', () => resolve(false));
  });
}

/** Runs one session to its end (or its deadline); never throws for what the gateway does. */
export async function runSession(plan: SessionPlan): Promise<SessionRecord> {
  const record: SessionRecord = {
    workflowId: plan.workflowId,
    holder: plan.holder,
    reattaches: [],
    rtt: { direct: [], bridged: [] },
    deliveries: [],
    answersSent: new Map(),
    recoveries: [],
    reattachesClosed1012: 0,
    bridgeRefusals: [],
    firstFrameMs: Number.NaN,
    turnMs: Number.NaN,
    end: 'unknown',
    errors: [],
  };
  let socketCount = 0;
  const open: Conn[] = [];
  const connect = (replica: number): Conn => {
    const conn = openConn(plan.gateways[replica] as string, socketCount++, replica);
    open.push(conn);
    return conn;
  };
  const seen = new Set<string>();
  const drops = [...plan.drops];
  const started = performance.now();
  try {
    let conn = connect(plan.holder);
    if (!(await whenOpen(conn))) {
      record.end = 'the first connection did not open';
      return record;
    }
    conn.send({ startRequest: { workflowID: plan.workflowId, goal: 'bench', workflowMetadata: scenarioMetadata(turnSteps(plan.actions)) } });
    let answeredAt: number | undefined;
    /** A frame already read (a re-attach's first), handled before the socket is read again. */
    let pending: ConnEvent | undefined;
    for (;;) {
      const left = Math.min(EVENT_TIMEOUT_MS, plan.deadline - performance.now());
      const event = pending ?? (await conn.next(left));
      const replayed = pending !== undefined;
      pending = undefined;
      if (event.kind === 'close' && event.code === RECONNECT_CODE && record.recoveries.length < MAX_RECOVERIES) {
        // The gateway gave the bridge up (the run is parked again): reconnect, as a client does, on the holder.
        const next = await reattach(plan, record, conn, undefined, plan.holder, connect);
        if (!next) return record;
        conn = next.conn;
        pending = next.first;
        continue;
      }
      if (event.kind === 'close') {
        record.turnMs = event.at - started;
        record.end = event.code === 1000 ? '1000' : `close ${event.code} ${event.reason}`;
        return record;
      }
      if (event.kind !== 'frame') {
        record.end = event.kind === 'timeout' ? `no frame for ${Math.round(left)} ms after ${seen.size} actions` : `refused ${event.status}`;
        return record;
      }
      if (record.deliveries.length === 0) record.firstFrameMs = event.at - started;
      record.deliveries.push({ socket: conn.socket, requestID: event.requestID });
      // A re-attach's first frame is no round-trip sample: its latency is the re-attach's.
      if (answeredAt !== undefined && !replayed) (conn.replica === plan.holder ? record.rtt.direct : record.rtt.bridged).push(event.at - answeredAt);
      answeredAt = undefined;
      const fresh = !seen.has(event.requestID);
      seen.add(event.requestID);
      const drop = drops[0];
      if (fresh && drop && seen.size >= drop.afterActions) {
        // Dropped with this action unanswered; the new socket's first frame should be it again.
        drops.shift();
        const next = await reattach(plan, record, conn, event.requestID, drop.to, connect);
        if (!next) return record;
        conn = next.conn;
        pending = next.first;
        continue;
      }
      record.answersSent.set(event.requestID, (record.answersSent.get(event.requestID) ?? 0) + 1);
      answeredAt = performance.now();
      conn.send({ actionResponse: { requestID: event.requestID, ...ANSWER } });
    }
  } catch (err) {
    record.errors.push((err as Error).stack ?? String(err));
    record.end = 'error';
    return record;
  } finally {
    for (const conn of open) conn.ws.terminate();
  }
}

/**
 * Drops `lost` with `unanswered` unanswered and re-attaches on `to` (or, once the bridge
 * is known to be missing, on the holder). Resolves with the new socket, whose first frame
 * (the replay) has been read, or undefined when the session cannot go on. Without
 * `unanswered`, `lost` was closed by the gateway (1012): a recovery, no latency sample.
 */
async function reattach(
  plan: SessionPlan,
  record: SessionRecord,
  lost: Conn,
  unanswered: string | undefined,
  wanted: number,
  connect: (replica: number) => Conn,
): Promise<{ conn: Conn; first: ConnEvent } | undefined> {
  let to = plan.bridge.unavailable ? plan.holder : wanted;
  const lostAt = performance.now();
  lost.ws.terminate();
  let retries = 0;
  let retryUntil = lostAt + plan.retryBudgetMs;
  for (;;) {
    const conn = connect(to);
    if (!(await whenOpen(conn))) {
      const event = await conn.next(1_000);
      record.end = `re-attach on gateway ${to}: ${event.kind === 'refused' ? `upgrade refused ${event.status}` : 'socket did not open'}`;
      return undefined;
    }
    conn.send({ startRequest: { workflowID: plan.workflowId, goal: '' } });
    const event = await conn.next(Math.min(EVENT_TIMEOUT_MS, plan.deadline - performance.now()));
    if (event.kind === 'frame') {
      if (unanswered === undefined) {
        record.recoveries.push({ ms: event.at - lostAt, retries });
        return { conn, first: event };
      }
      // Only a re-attach straight after its loss is a latency sample: one that first fell back from a missing bridge is not.
      if (to === wanted)
        record.reattaches.push({
          kind: reattachKind(lost.replica === plan.holder, to === plan.holder),
          ms: event.at - lostAt,
          retries,
          replayedUnanswered: event.requestID === unanswered,
        });
      if (event.requestID !== unanswered) record.errors.push(`re-attach on gateway ${to}: first frame #${event.requestID}, not the unanswered #${unanswered}`);
      return { conn, first: event };
    }
    if (event.kind === 'close' && event.code === 1013 && performance.now() < retryUntil) {
      retries += 1;
      await sleep(RETRY_DELAY_MS);
      continue;
    }
    if (event.kind === 'close' && event.code === RECONNECT_CODE && to !== plan.holder && record.reattachesClosed1012 < MAX_RECOVERIES) {
      // The replica the reconnect landed on could not bridge it (its claim went unanswered): reconnect on the holder; no sample.
      record.reattachesClosed1012 += 1;
      to = plan.holder;
      retries = 0;
      retryUntil = performance.now() + plan.retryBudgetMs;
      continue;
    }
    if (event.kind === 'close' && event.code === 1013 && to !== plan.holder) {
      // Refused for the whole budget on a replica that does not hold the run: no bridge. Back to the holder.
      record.bridgeRefusals.push({ code: event.code, reason: event.reason });
      plan.bridge.unavailable = true;
      to = plan.holder;
      retries = 0;
      retryUntil = performance.now() + plan.retryBudgetMs;
      continue;
    }
    record.end = `re-attach on gateway ${to}: ${event.kind === 'close' ? `close ${event.code} ${event.reason}` : event.kind}`;
    return undefined;
  }
}
