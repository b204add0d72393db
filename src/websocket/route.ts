/**
 * GET /api/v4/ai/duo_workflows/ws with an RFC 6455 upgrade (docs/spec.md §11): everything
 * decided before the upgrade, on the raw request — the drain, the process cap, the
 * Origin check (cross-site WebSocket hijacking is refused), the owner's preauthorization
 * (GET, same path and query; a denial is the owner's answer, passed through) — then the
 * upgrade (`ws`, no subprotocol, no compression, frames of at most 4 MiB) and the session
 * (connection.ts). A refusal is a plain HTTP answer with the error body and the status
 * error-status.ts gives its code. The session is a SERVER span (tracing.ts) from the
 * upgrade request to the socket's close, child of the client's traceparent.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import express from 'express';
import { WebSocketServer } from 'ws';
import type { Bridges } from './bridge/bridges';
import { callerOf } from '../core/caller';
import { GatewayError, toGatewayError } from '../core/errors';
import { correlation, type Logger } from '../core/log';
import type { Tracing } from '../observability/tracing';
import type { OwnerClient } from '../owner/owner-client';
import type { Launcher } from '../run/launcher';
import { sendError } from '../http/error-response';
import { errorStatus, retryAfterOf } from '../http/error-status';
import { requestIdOf } from '../http/request-id';
import type { ClientRunSettings, ParkedRuns } from './client-run';
import { WebSocketConnection, type SessionSettings } from './connection';
import type { WebSocketMetrics } from './metrics';

export const WEBSOCKET_PATH = '/api/v4/ai/duo_workflows/ws';
/** The largest frame a client may send (a startRequest is at most what an execute body is). */
const MAX_FRAME_BYTES = 4 * 1024 * 1024;

/**
 * The route's plain-HTTP side, for the main listener (src/http/main-app.ts `routes`): it
 * answers upgrades only (WebSocketRoute.upgrade), so a GET without one is a client error.
 */
export function websocketHttpRoutes(logger: Logger): express.Router {
  return express.Router().get(WEBSOCKET_PATH, (_req, res) => {
    sendError(res, new GatewayError('INVALID_REQUEST', 'this route takes a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket)'), logger);
  });
}

export interface WebSocketRouteDeps {
  launcher: Launcher;
  owner: OwnerClient;
  metrics: WebSocketMetrics;
  logger: Logger;
  tracing: Tracing;
  settings: SessionSettings & ClientRunSettings;
  maxSessions: number;
  /** Origins allowed besides the request's own host. */
  allowedOrigins: readonly string[];
  /** Compare Origin with X-Forwarded-Host instead of Host. */
  trustForwardedHost: boolean;
  /** Runs whose connection was lost, waiting for their client (docs/spec.md §12): this process's. */
  parked: ParkedRuns;
  /** Bridges to runs parked on other replicas; absent without Redis or without parking. */
  bridges?: Bridges | undefined;
}

export class WebSocketRoute {
  private readonly server = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false, clientTracking: false });
  /** Sessions upgraded or being authorized: what the cap counts. */
  private readonly sessions = new Set<WebSocketConnection>();
  private pending = 0;
  private readonly parked: ParkedRuns;
  /**
   * One timer for every session's pings and pong deadline (a timer or two per session
   * would cost each of thousands of held sessions its Timeouts and closures): every tenth
   * of the shorter of the two, so a ping is at most that late and a deadline as well.
   */
  private liveness: NodeJS.Timeout | undefined;

  constructor(private readonly deps: WebSocketRouteDeps) {
    this.parked = deps.parked;
  }

  /** Sessions held now: connected, being authorized, or parked (a parked run holds a stream: it keeps its slot). */
  get size(): number {
    return this.sessions.size + this.pending + this.parked.size;
  }

  /** What the WebSocket part holds, entry by entry (/debug/structures): the route's, the parked backlogs' bytes, the bridges'. */
  get held(): Record<string, number> {
    const bridges = this.deps.bridges?.held ?? {};
    return {
      sessions: this.sessions.size,
      authorizing: this.pending,
      parked: this.parked.size,
      liveness_timer: this.liveness ? 1 : 0,
      backlog_bytes: this.deps.settings.backlogBudget.usedBytes,
      ...Object.fromEntries(Object.entries(bridges).map(([name, count]) => [`bridge_${name}`, count])),
    };
  }

  /** Whether `url` (the request target) is this route. */
  static matches(url: string | undefined): boolean {
    return (url ?? '').split('?')[0] === WEBSOCKET_PATH;
  }

  /** The main listener's 'upgrade' event. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => undefined);
    const requestId = requestIdOf(req.headers['x-request-id']);
    if (!WebSocketRoute.matches(req.url)) {
      refuse(socket, new GatewayError('NOT_FOUND', `no WebSocket route for ${(req.url ?? '').split('?')[0]}`), requestId);
      return;
    }
    void this.authorize(req, socket, head, requestId);
  }

  /**
   * Draining: sessions that have not started a run are closed (1001), those bridged to a run
   * on another replica hand it back and are closed 1012; the others end with their runs.
   * Resolves once the bridged ones are handed back.
   */
  async shutdownIdle(): Promise<void> {
    await Promise.all([...this.sessions].map((session) => session.shutdownIdle()));
  }

  /** Closing: every socket goes at once. */
  terminateAll(): void {
    this.stopTicking();
    for (const session of this.sessions) session.terminate();
  }

  private tick(): void {
    const now = Date.now();
    for (const session of this.sessions) session.checkLiveness(now);
  }

  private stopTicking(): void {
    clearInterval(this.liveness);
    this.liveness = undefined;
  }

  private async authorize(req: IncomingMessage, socket: Duplex, head: Buffer, requestId: string): Promise<void> {
    const { deps } = this;
    const started = performance.now();
    const span = deps.tracing.request('websocket', req.headers, requestId);
    let answer = 'upgraded';
    this.pending += 1;
    const gone = new AbortController();
    const onGone = (): void => gone.abort();
    socket.once('close', onGone);
    try {
      deps.launcher.checkServing();
      if (this.size > deps.maxSessions) {
        deps.metrics.capRejection('websocket');
        throw new GatewayError('CAPACITY_EXHAUSTED', 'this instance holds its maximum of WebSocket sessions');
      }
      if (!this.originAllowed(req)) throw new GatewayError('FORBIDDEN_ORIGIN', 'this Origin may not open a WebSocket session here');
      const preauth = await deps.owner.preauthorize('GET', req.url ?? WEBSOCKET_PATH, req.headers, requestId, gone.signal, 'websocket', span);
      if (preauth.kind === 'denied') {
        answer = 'PREAUTH_DENIED';
        deps.metrics.connectionError('websocket', 'preauth');
        writeRaw(socket, preauth.status, { ...preauth.headers, 'X-Longrun-Error-Code': 'PREAUTH_DENIED' }, preauth.body, requestId);
        deps.tracing.requestEnded(span, { status: preauth.status, errorCode: answer });
        return;
      }
      if (gone.signal.aborted) throw new GatewayError('CLIENT_GONE', 'the client hung up before the upgrade');
      const auth = preauth.answer.DuoWorkflow;
      const caller = callerOf(req);
      this.server.handleUpgrade(req, socket, head, (ws) => {
        const session = new WebSocketConnection(
          ws,
          { auth, requestId, caller, span },
          { launcher: deps.launcher, metrics: deps.metrics, logger: deps.logger, tracing: deps.tracing, settings: deps.settings, parked: this.parked, bridges: deps.bridges },
        );
        this.sessions.add(session);
        this.liveness ??= setInterval(() => this.tick(), Math.max(10, Math.floor(Math.min(deps.settings.pingMs, deps.settings.pongTimeoutMs) / 10)));
        this.liveness.unref();
        deps.metrics.websocketSessionsOpen.inc();
        void session.serve().finally(() => {
          this.sessions.delete(session);
          deps.metrics.websocketSessionsOpen.dec();
          if (this.sessions.size === 0) this.stopTicking();
        });
      });
    } catch (err) {
      const error = toGatewayError(err);
      answer = error.code;
      if (error.code === 'INTERNAL') deps.logger.error({ err, ...correlation(requestId) }, 'internal error');
      deps.metrics.connectionError('websocket', error.errorType);
      refuse(socket, error, requestId);
      deps.tracing.requestEnded(span, { status: errorStatus[error.code], errorCode: error.code });
    } finally {
      this.pending -= 1;
      socket.off('close', onGone);
      deps.logger.info(
        { ...correlation(requestId), path: WEBSOCKET_PATH, transport: 'websocket', reason: answer, duration_ms: Math.round(performance.now() - started), ...span.logFields },
        'websocket upgrade',
      );
    }
  }

  /**
   * No Origin (a non-browser client) is allowed; a browser's only when its host is the
   * request's (Host, or X-Forwarded-Host when trusted) or it is listed.
   */
  private originAllowed(req: IncomingMessage): boolean {
    const origin = req.headers.origin;
    if (origin === undefined) return true;
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false;
    }
    if (this.deps.allowedOrigins.includes(url.origin)) return true;
    const forwarded = req.headers['x-forwarded-host'];
    const host = this.deps.trustForwardedHost && typeof forwarded === 'string' ? forwarded.split(',')[0]?.trim() : req.headers.host;
    return host !== undefined && url.host.toLowerCase() === host.toLowerCase();
  }
}

/** An error answered on the raw socket, before any upgrade: status, JSON body, Retry-After. */
function refuse(socket: Duplex, error: GatewayError, requestId: string): void {
  const retryAfterS = retryAfterOf(error.code, error.retryAfterS);
  const headers: Record<string, string | string[]> = { 'Content-Type': 'application/json; charset=utf-8' };
  if (retryAfterS !== undefined) headers['Retry-After'] = String(retryAfterS);
  writeRaw(socket, errorStatus[error.code], headers, Buffer.from(JSON.stringify(error.toBody())), requestId);
}

function writeRaw(socket: Duplex, status: number, headers: Record<string, string | string[]>, body: Buffer, requestId: string): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const lines = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}`];
  for (const [name, value] of Object.entries(headers)) {
    for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`);
  }
  lines.push(`X-Request-Id: ${requestId}`, `Content-Length: ${body.length}`, 'Connection: close', '', '');
  socket.end(Buffer.concat([Buffer.from(lines.join('\r\n')), body]));
}
