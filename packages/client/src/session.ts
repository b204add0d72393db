/**
 * A session client for the WebSocket route `GET /api/v4/ai/duo_workflows/ws` (docs/spec.md
 * §11, §12; docs/owner-integration.md "Session clients"), for Node on `ws`: it opens the
 * socket, sends the startRequest as a text frame, decodes the client-bound actions (binary
 * protojson frames, proto field names) and hands them to `onAction` / `onCheckpoint`, and
 * sends the client's answers, heartbeats and stop.
 *
 * A connection lost (no close frame: ws code 1006, an 'error', a socket that stopped
 * hearing from the gateway), or closed 1001 (`server shutdown`: the replica drains, the run
 * stays resumable) or 1012 (service restart), is reconnected with jittered exponential
 * backoff, and the *resume start* is sent: the same workflowID, an empty goal, no approval
 * — no new input — with the rest of the original start. The gateway re-attaches the new
 * connection to the parked run and sends every client-bound action not answered yet (again,
 * with the same requestID), then those emitted meanwhile, then the live stream. The client
 * de-duplicates nothing: `onAction` is called again for a replayed action. An action the
 * client had answered is never replayed; one it is still executing may be (answer it once,
 * when it is done — the answer goes on the connection current then).
 *
 * A first start the gateway's store fence refuses (1013 with the fence's reason: its Redis is
 * new, or lost its data, and grants no lock for up to one lease TTL; store-fence.ts) is sent
 * again when the reason says, until `storeFenceWaitMs` has passed since the first refusal:
 * the fence ends by itself, and a user of this client should not see it. A resume start
 * refused so is retried with the reconnect backoff instead, as any 1013 on a reconnect:
 * its run may be parked on a replica whose renewal takes the lock back within a round
 * trip, and re-attaching must not wait the whole fence (the resume window runs). Any other close —
 * 1000 (the flow ended), 1008, 1013 for a lock another session holds, 4400, … — is final
 * and reported through `onClose`.
 *
 * Only `ws` and the contract's message types (contract.ts).
 */
import WebSocket from 'ws';
import type { ActionResponseMember, ClientEvent, StartWorkflowRequest } from './contract';
import { fencedStartOf, type FencedStart } from './store-fence';
import type { StoreFence } from './vocabulary';

/** A client-bound action as the gateway sends it: protojson with proto field names, `requestID` and one action member. */
export interface SessionAction {
  requestID?: string;
  [member: string]: unknown;
}

/** A newCheckpoint action's payload (docs/spec.md §11). */
export interface SessionCheckpoint {
  requestID?: string;
  checkpoint: string;
  status?: string;
  goal?: string;
  errors?: string[];
  [field: string]: unknown;
}

/** What an answer carries besides its requestID: one of the ActionResponse members (protojson). */
export type SessionResponse = ActionResponseMember;

/** The start a session sends: a StartWorkflowRequest (protojson) with its workflowID and goal. */
export type SessionStart = StartWorkflowRequest & { workflowID: string; goal: string; [field: string]: unknown };

export interface SessionReconnectOptions {
  /** The first backoff ceiling. Default 250. */
  initialDelayMs: number;
  /** The largest backoff ceiling. Default 10 000. */
  maxDelayMs: number;
  /** Reconnect attempts after one loss before giving up. Default 10. */
  maxAttempts: number;
  /** `full`: each delay uniform in [0, ceiling] (default); `none`: the ceiling itself. */
  jitter: 'full' | 'none';
  /**
   * Give up once this long has passed since the loss: the gateway's resume window
   * (LONGRUN_WS_RESUME_WINDOW_MS; its default 60 000, and so this one).
   */
  windowMs: number;
}

export const defaultSessionReconnect: Readonly<SessionReconnectOptions> = Object.freeze({
  initialDelayMs: 250,
  maxDelayMs: 10_000,
  maxAttempts: 10,
  jitter: 'full',
  windowMs: 60_000,
});

/** How a session ended, once, through `onClose`. */
export interface SessionClose {
  /** The close code (1006 for a connection lost or never opened). */
  code: number;
  reason: string;
  /**
   * `closed`: the gateway (or close()) ended it with a final code; `gave_up`: reconnecting
   * failed maxAttempts times or past the resume window, or the store fence still refused
   * the start after `storeFenceWaitMs` (code 1013, the fence's reason); `refused`: a
   * reconnect's upgrade was refused for good (an HTTP status other than 429 or 5xx, e.g. the
   * preauth's 401/403).
   */
  how: 'closed' | 'gave_up' | 'refused';
  /** Reconnect attempts made since the last loss. */
  attempts: number;
  /** The HTTP status of a refused upgrade. */
  status?: number;
  /** The last connection error, when there was one. */
  error?: Error;
}

/** What happens on the way, through `onEvent` (for logs and a UI's "reconnecting…"). */
export type SessionEvent =
  | { kind: 'open'; attempt: number; resume: boolean }
  | { kind: 'lost'; code: number; reason: string; error?: Error }
  | { kind: 'reconnecting'; attempt: number; delayMs: number }
  /** The store fence refused the start: it is sent again after `delayMs`. */
  | { kind: 'fenced'; fence: StoreFence; delayMs: number };

export interface LongrunSessionOptions {
  /**
   * ws(s)://host/api/v4/ai/duo_workflows/ws, or a function called once per connection
   * attempt (the first and every reconnect) that returns it: a client that knows several
   * gateway addresses may reconnect through another one.
   */
  url: string | (() => string);
  /** Sent on every upgrade (each reconnect too): the same credentials keep the preauth's actor. */
  headers?: Record<string, string>;
  /** Added to the URL's query (e.g. client_type, project_id). */
  query?: Record<string, string>;
  reconnect?: Partial<SessionReconnectOptions>;
  /**
   * A connection that hears nothing from the gateway (no frame, no ping) this long is
   * counted lost and reconnected. The gateway pings every LONGRUN_WS_PING_MS (default
   * 20 s). Default 45 000; 0 turns it off.
   */
  idleTimeoutMs?: number;
  /**
   * How long a start the gateway's store fence refuses is sent again, from the first
   * refusal (default 75 000 ms: the gateway's default lease TTL, 60 s, the longest a fence
   * lasts, plus a margin). Past it the session ends `gave_up` with the 1013.
   */
  storeFenceWaitMs?: number;
  /** Every client-bound action but newCheckpoint (and newCheckpoint too when there is no onCheckpoint). May be called again for a replayed requestID. */
  onAction: (action: SessionAction, session: LongrunSession) => void;
  /** newCheckpoint actions, which need no answer. */
  onCheckpoint?: (checkpoint: SessionCheckpoint, session: LongrunSession) => void;
  /** Once, when the session has ended for good. */
  onClose?: (close: SessionClose) => void;
  onEvent?: (event: SessionEvent) => void;
  /** ws's own client options (TLS, agent, …); headers go in `headers`. */
  wsOptions?: Omit<WebSocket.ClientOptions, 'headers'>;
}

/** Close codes after which the session reconnects: lost (1006), going away (1001), service restart (1012). */
export const reconnectCloseCodes: readonly number[] = Object.freeze([1006, 1001, 1012]);

/** A connection open this long without a close counts as good: the reconnect attempts start over. */
const STABLE_MS = 2_000;
const DEFAULT_STORE_FENCE_WAIT_MS = 75_000;
/** A fenced start is sent again up to this fraction of the fence's time after it ends, so a fleet of clients does not come back in step. */
const FENCE_JITTER = 0.2;

type State = 'idle' | 'connecting' | 'open' | 'waiting' | 'closed';

export class LongrunSession {
  private readonly reconnectOptions: SessionReconnectOptions;
  private ws: WebSocket | undefined;
  private state: State = 'idle';
  private startRequest: SessionStart | undefined;
  /** Reconnect attempts since the last loss, and when it was. */
  private attempts = 0;
  private lostAt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private stableTimer: NodeJS.Timeout | undefined;
  private lastError: Error | undefined;
  /** Whether the connection being opened is a reconnect (it sends the resume start). */
  private resuming = false;
  /** When the store fence first refused the start (of the refusals in a row), else undefined. */
  private fencedSince: number | undefined;

  constructor(private readonly options: LongrunSessionOptions) {
    this.reconnectOptions = { ...defaultSessionReconnect, ...options.reconnect };
  }

  /** The current connection (for diagnostics and tests); undefined between connections. */
  get socket(): WebSocket | undefined {
    return this.ws;
  }

  /** Whether the session has ended (onClose was called, or close() was). */
  get closed(): boolean {
    return this.state === 'closed';
  }

  /**
   * Opens the socket and sends the start. Resolves once it is sent; rejects when the first
   * connection cannot be opened (its upgrade refused, the gateway unreachable) — that is not
   * retried, as no run exists yet, and onClose is not called.
   */
  start(request: SessionStart): Promise<void> {
    if (this.state !== 'idle') return Promise.reject(new Error('LongrunSession: start() was called already'));
    this.startRequest = request;
    return new Promise((resolve, reject) => this.connect(false, resolve, reject));
  }

  /** Sends an actionResponse for `requestID` on the current connection; false when there is none (the action will be replayed after a reconnect). */
  answer(requestID: string, response: SessionResponse): boolean {
    return this.send({ actionResponse: { ...response, requestID } });
  }

  /** Sends a heartbeat (the language server sends one a minute). */
  heartbeat(): boolean {
    return this.send({ heartbeat: { timestamp: String(Date.now()) } });
  }

  /** Asks the service to stop the workflow (stopWorkflow); the gateway closes the session when the run ends. */
  stop(reason: string): boolean {
    return this.send({ stopWorkflow: { reason } });
  }

  /** Closes the session with 1000; no reconnect after it. The gateway stops the run (WORKHORSE_WEBSOCKET_CLOSE_1000). */
  close(): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    clearTimeout(this.retryTimer);
    clearTimeout(this.idleTimer);
    clearTimeout(this.stableTimer);
    const ws = this.ws;
    if (!ws) {
      if (this.startRequest) this.options.onClose?.({ code: 1000, reason: '', how: 'closed', attempts: this.attempts });
      return;
    }
    if (ws.readyState === WebSocket.OPEN) ws.close(1000);
    else ws.terminate();
  }

  /** The start to send on a reconnect: no new input (spec §12) — the goal empty, no approval — the rest as first sent. */
  static resumeStartOf(request: SessionStart): SessionStart {
    const resume: SessionStart = { ...request, goal: '' };
    delete resume.approval;
    return resume;
  }

  private send(event: ClientEvent): boolean {
    const ws = this.ws;
    if (this.state !== 'open' || !ws || ws.readyState !== WebSocket.OPEN) return false;
    ws.send(JSON.stringify(event));
    return true;
  }

  private connect(resume: boolean, opened?: () => void, failed?: (err: Error) => void): void {
    const request = this.startRequest as SessionStart;
    this.state = 'connecting';
    this.resuming = resume;
    const url = new URL(typeof this.options.url === 'function' ? this.options.url() : this.options.url);
    for (const [name, value] of Object.entries(this.options.query ?? {})) url.searchParams.set(name, value);
    const ws = new WebSocket(url, { perMessageDeflate: false, ...this.options.wsOptions, headers: this.options.headers ?? {} });
    this.ws = ws;
    let refusedStatus: number | undefined;
    let didOpen = false;
    ws.on('unexpected-response', (_req, res) => {
      refusedStatus = res.statusCode;
      res.resume();
      ws.terminate();
    });
    ws.on('error', (err) => {
      this.lastError = err;
    });
    ws.on('ping', () => this.armIdle(ws));
    ws.once('open', () => {
      didOpen = true;
      if (this.state === 'closed') {
        ws.close(1000);
        return;
      }
      this.state = 'open';
      const attempt = this.attempts;
      this.armIdle(ws);
      // The backoff starts over once this connection proves good (a frame, or STABLE_MS open): a start refused at once (1013) counts as an attempt.
      this.stableTimer = setTimeout(() => this.stable(ws), STABLE_MS);
      ws.send(JSON.stringify({ startRequest: resume ? LongrunSession.resumeStartOf(request) : request }));
      this.options.onEvent?.({ kind: 'open', attempt, resume });
      opened?.();
    });
    ws.on('message', (data: Buffer) => {
      this.armIdle(ws);
      this.stable(ws);
      this.onFrame(data);
    });
    ws.once('close', (code: number, reasonBuffer: Buffer) => {
      if (this.ws === ws) this.ws = undefined;
      clearTimeout(this.idleTimer);
      clearTimeout(this.stableTimer);
      const reason = reasonBuffer.toString('utf8');
      if (!didOpen && failed) {
        // The first connection: no run exists, nothing to resume.
        this.state = 'closed';
        const detail = refusedStatus === undefined ? (this.lastError?.message ?? `closed ${code}`) : `upgrade refused: HTTP ${refusedStatus}`;
        failed(Object.assign(new Error(`LongrunSession: could not open ${url.origin}${url.pathname}: ${detail}`), { status: refusedStatus, cause: this.lastError }));
        return;
      }
      this.onClosed(code, reason, didOpen, refusedStatus);
    });
  }

  private onClosed(code: number, reason: string, didOpen: boolean, refusedStatus: number | undefined): void {
    if (this.state === 'closed') {
      // close() was called: reported as the client's own close.
      this.finish({ code: didOpen ? code : 1000, reason, how: 'closed', attempts: this.attempts });
      return;
    }
    if (refusedStatus !== undefined && refusedStatus !== 429 && refusedStatus < 500) {
      this.finish({ code, reason, how: 'refused', attempts: this.attempts, status: refusedStatus, ...this.errorField() });
      return;
    }
    const fenced = this.resuming ? undefined : fencedStartOf(code, reason);
    if (fenced) {
      this.waitOutFence(fenced, code, reason);
      return;
    }
    // 1013 on a resume: the gateway may not have noticed the old connection lost yet (it parks the run after its pong timeout).
    const retry = reconnectCloseCodes.includes(code) || (code === 1013 && this.resuming);
    if (!retry) {
      this.finish({ code, reason, how: 'closed', attempts: this.attempts, ...this.errorField() });
      return;
    }
    if (this.attempts === 0) {
      this.lostAt = Date.now();
      this.options.onEvent?.({ kind: 'lost', code, reason, ...this.errorField() });
    }
    const { maxAttempts, windowMs } = this.reconnectOptions;
    if (this.attempts >= maxAttempts || Date.now() - this.lostAt >= windowMs) {
      this.finish({ code, reason, how: 'gave_up', attempts: this.attempts, ...(refusedStatus === undefined ? {} : { status: refusedStatus }), ...this.errorField() });
      return;
    }
    const delayMs = this.delayOf(this.attempts);
    this.attempts += 1;
    this.state = 'waiting';
    this.options.onEvent?.({ kind: 'reconnecting', attempt: this.attempts, delayMs });
    this.retryTimer = setTimeout(() => {
      if (this.state === 'waiting') this.connect(true);
    }, delayMs);
  }

  /** Sends the refused first start again once the fence is over, if that is within storeFenceWaitMs. */
  private waitOutFence(fenced: FencedStart, code: number, reason: string): void {
    const now = Date.now();
    this.fencedSince ??= now;
    const waitMs = fenced.retryAfterS * 1_000;
    const delayMs = Math.round(waitMs * (1 + (this.reconnectOptions.jitter === 'full' ? FENCE_JITTER * Math.random() : 0)));
    if (now + waitMs - this.fencedSince > (this.options.storeFenceWaitMs ?? DEFAULT_STORE_FENCE_WAIT_MS)) {
      this.finish({ code, reason, how: 'gave_up', attempts: this.attempts });
      return;
    }
    this.state = 'waiting';
    this.options.onEvent?.({ kind: 'fenced', fence: fenced.fence, delayMs });
    this.retryTimer = setTimeout(() => {
      if (this.state === 'waiting') this.connect(false);
    }, delayMs);
  }

  /** The backoff before attempt `n` (0-based): min(max, initial·2ⁿ), uniform in [0, that] with full jitter. */
  private delayOf(n: number): number {
    const { initialDelayMs, maxDelayMs, jitter } = this.reconnectOptions;
    const ceiling = Math.min(maxDelayMs, initialDelayMs * 2 ** Math.min(n, 30));
    return Math.round(jitter === 'full' ? Math.random() * ceiling : ceiling);
  }

  private stable(ws: WebSocket): void {
    clearTimeout(this.stableTimer);
    if (this.ws !== ws) return;
    this.attempts = 0;
    this.fencedSince = undefined;
    this.lastError = undefined;
  }

  private armIdle(ws: WebSocket): void {
    clearTimeout(this.idleTimer);
    const idleMs = this.options.idleTimeoutMs ?? 45_000;
    if (idleMs <= 0 || this.state !== 'open') return;
    // Heard nothing: the socket is dead without knowing it; terminate() closes it 1006, a loss.
    this.idleTimer = setTimeout(() => ws.terminate(), idleMs);
  }

  private onFrame(data: Buffer): void {
    let action: SessionAction;
    try {
      action = JSON.parse(data.toString('utf8')) as SessionAction;
    } catch {
      return;
    }
    if (typeof action !== 'object' || action === null) return;
    const plain = withoutNulls(action);
    const checkpoint = plain['newCheckpoint'] as SessionCheckpoint | undefined;
    if (checkpoint !== undefined && this.options.onCheckpoint) {
      this.options.onCheckpoint({ ...checkpoint, ...(plain.requestID === undefined ? {} : { requestID: plain.requestID }) }, this);
      return;
    }
    this.options.onAction(plain, this);
  }

  private finish(close: SessionClose): void {
    this.state = 'closed';
    clearTimeout(this.retryTimer);
    clearTimeout(this.idleTimer);
    clearTimeout(this.stableTimer);
    this.options.onClose?.(close);
  }

  private errorField(): { error?: Error } {
    return this.lastError ? { error: this.lastError } : {};
  }
}

/** An Action as a plain object: the oneof members not set (null in protojson) left out. */
function withoutNulls(action: SessionAction): SessionAction {
  const out: SessionAction = {};
  for (const [key, value] of Object.entries(action)) if (value !== null) out[key] = value;
  return out;
}
