/**
 * One WebSocket connection (docs/spec.md §11, §12), from the upgrade to the close: the
 * client's frames in, the run's actions for the client out (through its ClientRun,
 * client-run.ts, which outlives a lost connection), liveness, and how it ends.
 *
 *   awaiting_start ──startRequest──► starting ──► claiming   (its run is parked on another
 *                                                             replica: the claim is out)
 *                                              ──► opening    (the launcher takes the lock, discovers
 *                                                             MCP tools, opens the stream)
 *     claiming | opening ──► open: client events → its client (the run here, or the bridge to
 *                                  it); actions → binary frames (ActionSink)
 *     any ──the socket closes──► closed: the run's end chooses the close code
 *                                        (close-codes.ts), or the client's end the stop
 *
 * The phase carries what each step knows (the workflow, the events that came early, the
 * claim, the run being opened, the client); the close handshake of the socket itself (our
 * close frame sent, its timer) is close-handshake.ts.
 *
 * How the client's end reaches the run (Workhorse's runner): a close frame 1000/1001 stops
 * it with WORKHORSE_WEBSOCKET_CLOSE_<code>; no pong within the read deadline with
 * WORKHORSE_WEBSOCKET_PONG_TIMEOUT; a ping that cannot be written with
 * WORKHORSE_WEBSOCKET_PING_FAILED; any other close code, a connection lost without a
 * close frame, an undecodable frame or a client that stops reading cancel the call, no
 * stop. A connection *lost* — no close frame, no pong, a ping or write that fails — parks
 * the run instead, for LONGRUN_WS_RESUME_WINDOW_MS (0: stopped as above): a start of the
 * same actor naming that workflow with no new input re-attaches to it on this replica.
 * Everything the connection holds — its timers, its place in the route's count — is
 * given back when its socket closes, whichever side closed it. The connection is the
 * upgrade's SERVER span (tracing.ts), ended when the socket closes; a re-attach links it
 * and the run's span both ways.
 */
import type { WebSocket } from 'ws';
import type { Bridges } from './bridge/bridges';
import { SocketLink } from './bridge/socket-link';
import { GatewayError } from '../core/errors';
import { correlation, type Logger } from '../core/log';
import { TraceSpan, type Tracing } from '../observability/tracing';
import type { AuthorizedStart, Launcher, SessionRun } from '../run/launcher';
import { ClientRun, type ClientRunSettings, type Connection, type ParkedRuns } from './client-run';
import { parseJsonBody } from '../core/json-body';
import { authorizeStartRequest } from '../run/start-request';
import { STOPS, type StopReason } from '../run/stop-reasons';
import { messageTypes, type ClientEvent, type DecodedClientEvent, type StartWorkflowRequest } from '../workflow/contract';
import { MAX_JSON_DEPTH, decodeProtoJson } from '../workflow/protojson';
import { EARLY_FLOOD, HEARTBEAT_FLOOD, NORMAL, NO_START, RUN_UNREACHABLE, SERVICE_RESTART, closeForRefusal, invalidRequest, type Close } from './close-codes';
import { CloseHandshake } from './close-handshake';
import { Backpressure } from './flow-control';
import type { WebSocketMetrics } from './metrics';

export interface SessionSettings {
  pingMs: number;
  pongTimeoutMs: number;
  writeTimeoutMs: number;
  closeTimeoutMs: number;
  /** A client that sends no startRequest this long after the upgrade is closed 1008. */
  startTimeoutMs: number;
}

export interface SessionDeps {
  launcher: Launcher;
  metrics: WebSocketMetrics;
  logger: Logger;
  tracing: Tracing;
  settings: SessionSettings & ClientRunSettings;
  /** This process's parked runs (the route's). */
  parked: ParkedRuns;
  /** Bridges to runs parked on other replicas (docs/spec.md §12); absent without Redis or without parking. */
  bridges?: Bridges | undefined;
}

/** What the connection's events go to: its run here (ClientRun), or a run on another replica through a bridge (SocketLink). */
type SessionClient = ClientRun | SocketLink;

/** What the connection was authorized for: the start, less the request the client sends. */
export type SessionAuth = Omit<AuthorizedStart, 'request' | 'signal'>;

/**
 * Where the connection is, and what it knows there. `early`: client events that came
 * before the run could take them, passed on once it can (at most EARLY_BYTES of frames).
 */
type Phase =
  | { readonly state: 'awaiting_start' }
  | { readonly state: 'starting'; readonly workflowId: string; readonly early: ClientEvent[] }
  | { readonly state: 'claiming'; readonly workflowId: string; readonly early: ClientEvent[]; readonly link: SocketLink }
  | {
      readonly state: 'opening';
      readonly workflowId: string;
      readonly early: ClientEvent[];
      /** The run being opened (the launcher has not answered yet). */
      readonly run: ClientRun;
      /** Aborted when the socket closes while the run is being opened (the launcher's caller signal)... */
      readonly gone: AbortController;
      /** ...unless the connection was lost and that run parked: then the start goes on, for the client's re-attach. */
      parked: boolean;
    }
  | {
      readonly state: 'open';
      readonly workflowId: string;
      readonly client: SessionClient;
      /** A drain closes this bridged connection (1012): what the client sends until its close still goes to the run, handed back after. */
      handingBack: boolean;
    }
  | { readonly state: 'closed'; readonly workflowId: string | undefined };

type State = Phase['state'];

/**
 * Heartbeats a client may send in one second. The language server sends one a minute;
 * past this the client is flooding the service, and the connection is closed 1008.
 */
const MAX_HEARTBEATS_PER_SECOND = 20;
/**
 * Bytes of client frames kept while the run is being opened or claimed (seconds: lock,
 * MCP discovery, the stream's opening). A client has nothing to answer yet; past this it is
 * flooding, and the connection is closed 1008 rather than the process holding what it sends.
 */
const EARLY_BYTES = 1024 * 1024;

const AWAITING_START: Phase = Object.freeze({ state: 'awaiting_start' });
const { client_gone: CLIENT_GONE, pong_timeout: PONG_TIMEOUT, ping_failed: PING_FAILED } = STOPS;

export class WebSocketConnection implements Connection {
  private phase: Phase = AWAITING_START;
  /** Liveness, checked by the route's one tick (WebSocketRoute.tick): the last ping sent, the last pong heard. */
  private pingedAt = Date.now();
  private pongAt = Date.now();
  private startTimer: NodeJS.Timeout | undefined;
  /** Bytes of the frames kept in the phase's `early` list. */
  private earlyBytes = 0;
  /** Heartbeats in the current one-second window, and when it began. */
  private heartbeats = 0;
  private heartbeatWindow = 0;
  /** Frames handed to ws and not yet written to the socket (flow-control.ts). */
  private readonly flow = new Backpressure();
  private readonly handshake: CloseHandshake;
  private readonly closed: Promise<void>;
  /** The close code this side sent, and the run this connection served (started, or re-attached to): for the connection's span. */
  private closeCode: number | undefined;
  private runId: string | undefined;

  constructor(
    private readonly socket: WebSocket,
    private readonly auth: SessionAuth,
    private readonly deps: SessionDeps,
  ) {
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    this.handshake = new CloseHandshake(socket, deps.settings.closeTimeoutMs, (close) => {
      this.closeCode = close.code;
      deps.metrics.websocketClose(close.code);
    });
  }

  /** The connection's span (the upgrade's SERVER span). */
  private get span(): TraceSpan {
    return this.auth.span ?? TraceSpan.NONE;
  }

  /** How long a stalled client may hold the run before it counts as gone. */
  get stallMs(): number {
    return this.deps.settings.writeTimeoutMs;
  }

  private get state(): State {
    return this.phase.state;
  }

  /** The workflow the connection started, once it did. */
  private get workflowId(): string | undefined {
    return this.phase.state === 'awaiting_start' ? undefined : this.phase.workflowId;
  }

  /** Whether the run holds (or is taking) the lock: a second startRequest cannot take it again (Workhorse: 1013). */
  private get locking(): boolean {
    return (this.state === 'opening' || this.state === 'open') && this.auth.auth.LockConcurrentFlow === true;
  }

  /** Starts reading and the liveness checks; resolves once the socket has closed and the run (if any) ended. */
  async serve(): Promise<void> {
    const { socket } = this;
    socket.on('message', (data: Buffer, isBinary: boolean) => this.onFrame(data, isBinary));
    socket.on('pong', () => (this.pongAt = Date.now()));
    socket.on('error', () => undefined);
    socket.once('close', (code: number) => this.onClose(code));
    this.startTimer = setTimeout(() => {
      if (this.state === 'awaiting_start') this.close(NO_START);
    }, this.deps.settings.startTimeoutMs);
    await this.closed;
    this.deps.tracing.requestEnded(this.span, { status: 101, workflowId: this.workflowId, runId: this.runId, transport: 'websocket', closeCode: this.closeCode });
  }

  /**
   * The process is draining: a connection that opened no run yet is closed 1001 `server
   * shutdown`; one bridged to a run on another replica hands it back there, parked, and
   * is closed 1012 so its client reconnects elsewhere (docs/spec.md §12: no resume).
   *
   * The close goes first and the run back last: what the client sent before it saw the
   * close — an answer to an action, above all — still reaches the run (a client stops
   * sending once it has our close frame, and its own close comes after everything it
   * sent). Handed back first, such an answer was dropped, and the action replayed on the
   * next connection: a client that executes what it is sent ran it twice. Resolves once
   * the run is handed back (the client's close came, or the close timeout cut it off).
   */
  async shutdownIdle(): Promise<void> {
    const phase = this.phase;
    if (phase.state === 'awaiting_start') this.close(closeForRefusal('DRAINING', ''));
    if (phase.state !== 'open' || !(phase.client instanceof SocketLink)) return;
    phase.handingBack = true;
    this.close(SERVICE_RESTART);
    await this.closed;
    await phase.client.handBack();
  }

  /** The process is closing: the socket goes at once. */
  terminate(): void {
    this.socket.terminate();
  }

  /** Connection: one binary frame for the client (an Action as Workhorse marshals it); `written` once it is on the wire. */
  sendFrame(frame: Buffer, written?: () => void): 'ok' | 'full' | 'gone' {
    if (this.state === 'closed') return 'gone';
    // The client's FIN or close frame came and the socket's 'close' has not yet (ws reads
    // CLOSING): the frame goes the way of any written to a connection that is going (an
    // action stays unanswered, replayed on a re-attach), and the close decides — parked
    // (no close frame) or stopped (a close frame). 'gone' here ended the run client_gone.
    if (this.socket.readyState !== this.socket.OPEN) return 'ok';
    const room = this.flow.add(frame.length);
    this.deps.metrics.websocketFrame('out', frame.length);
    this.socket.send(frame, { binary: true }, (err) => {
      this.flow.done(frame.length);
      if (!err) written?.();
      if (err && this.state !== 'closed') this.lost(CLIENT_GONE);
    });
    return room ? 'ok' : 'full';
  }

  /** Connection: resolves once what was queued for the client is mostly written (or the socket closed). */
  drained(): Promise<void> {
    return this.state === 'closed' ? Promise.resolve() : this.flow.drained();
  }

  private onFrame(data: Buffer, isBinary: boolean): void {
    const phase = this.phase;
    // After our close frame (a drain's 1001 before any start, a refusal) nothing more is
    // served — but for a bridged connection handed back by a drain, whose client's last answers still go to its run.
    if (phase.state === 'closed' || (this.handshake.sent && !(phase.state === 'open' && phase.handingBack))) return;
    this.deps.metrics.websocketFrame('in', data.length);
    let decoded: DecodedClientEvent;
    try {
      decoded = decodeProtoJson(messageTypes.ClientEvent, parseJsonBody(data, MAX_JSON_DEPTH)) as DecodedClientEvent;
    } catch (err) {
      // Workhorse ends the connection with a normal close, no stop: the call is cancelled.
      this.log().info({ err: (err as Error).message, binary: isBinary }, 'websocket frame undecodable: closing');
      this.stopRun(CLIENT_GONE);
      this.close(NORMAL);
      return;
    }
    if (this.floodingEarly(data.length)) return;
    if (decoded.startRequest) {
      this.onStart(decoded.startRequest);
      return;
    }
    const event = clientEvent(decoded);
    // An event that sets nothing carries nothing for the service.
    if (!event) return;
    if ('heartbeat' in event && this.flooding()) {
      this.log().warn({ per_second: MAX_HEARTBEATS_PER_SECOND }, 'websocket client floods heartbeats: closing');
      this.stopRun(CLIENT_GONE);
      this.close(HEARTBEAT_FLOOD);
      return;
    }
    this.toClient(event);
  }

  /** A client event for the run: passed on, or kept in order until the run can take it. */
  private toClient(event: ClientEvent): void {
    const phase = this.phase;
    switch (phase.state) {
      case 'awaiting_start':
        // The service reads a startRequest first; anything else is what it would refuse.
        this.close(invalidRequest('the first event must be startRequest'));
        return;
      case 'starting':
      case 'claiming':
      case 'opening':
        phase.early.push(event);
        return;
      case 'open':
        phase.client.fromClient(event);
        return;
      case 'closed':
        return;
    }
  }

  private onStart(request: StartWorkflowRequest): void {
    const phase = this.phase;
    if (phase.state !== 'awaiting_start') {
      // A second start: under the lock it cannot take the lock again (Workhorse: 1013); else the service decides.
      if (this.locking) {
        this.stopRun(CLIENT_GONE);
        this.close(closeForRefusal('WORKFLOW_LOCKED', ''));
        return;
      }
      // Rewritten as the first was (capabilities, the connection's workflow); the service decides.
      let again: ClientEvent;
      try {
        again = { startRequest: authorizeStartRequest(request, { ...this.auth.auth, WorkflowID: this.workflowId ?? '' }, 'websocket') };
      } catch (err) {
        this.stopRun(CLIENT_GONE);
        this.close(invalidRequest((err as Error).message));
        return;
      }
      this.toClient(again);
      return;
    }
    const workflowId = request.workflowID ?? '';
    const authorized = this.auth.auth.WorkflowID;
    if (!workflowId) {
      this.close(invalidRequest('startRequest names no workflowID'));
      return;
    }
    if (authorized && authorized !== workflowId) {
      this.close(invalidRequest(`workflowID ${JSON.stringify(workflowId)} does not match the authorized workflow`));
      return;
    }
    this.phase = { state: 'starting', workflowId, early: [] };
    clearTimeout(this.startTimer);
    const actor = actorOf(this.auth);
    const carriesInput = Boolean(request.goal) || Boolean(request.approval);
    const parked = this.deps.parked.get(workflowId);
    if (parked?.resumableBy(actor, carriesInput)) {
      // Re-attach (docs/spec.md §12): the service never saw the loss; its start is not sent again.
      parked.attach(this, undefined, this.span.link);
      this.deps.tracing.linkToRun(this.span, parked.traceLink);
      this.opened(parked);
      return;
    }
    // A start that may not re-attach (new input, another actor or none) takes the workflow over: the parked run is stopped first.
    if (parked) void parked.stopParked('taken_over').then(() => this.launch(request, workflowId, actor));
    else if (this.deps.bridges) void this.startAcross(this.deps.bridges, request, workflowId, actor, carriesInput);
    else this.launch(request, workflowId, actor);
  }

  /**
   * A start whose workflow may be parked on another replica (docs/spec.md §12): the run
   * record says where; that replica is asked for it (bridges.ts) and decides — the run is
   * bridged to this socket, or its parked run stopped and this start goes to the service
   * as any other. A resume whose run record cannot be read (Redis down) is closed 1012
   * rather than started beside a run that may be parked elsewhere.
   */
  private async startAcross(bridges: Bridges, request: StartWorkflowRequest, workflowId: string, actor: string | undefined, carriesInput: boolean): Promise<void> {
    let holder: string | undefined;
    try {
      holder = await bridges.parkedElsewhere(workflowId);
    } catch (err) {
      if (!carriesInput) {
        this.log().warn({ err: (err as Error).message }, 'where the run is parked is unknown (Redis): closing the resume 1012');
        this.close(RUN_UNREACHABLE);
        return;
      }
    }
    const starting = this.phase;
    if (starting.state !== 'starting') return;
    if (holder === undefined) {
      this.launch(request, workflowId, actor);
      return;
    }
    const link = bridges.claim(holder, workflowId, actor, carriesInput, this, this.span.link);
    this.phase = { state: 'claiming', workflowId, early: starting.early, link };
    const outcome = await link.outcome;
    if (this.state !== 'claiming') return;
    if (outcome === 'attached') {
      this.deps.tracing.linkToRun(this.span, link.runLink);
      this.log().info({ holder }, 'websocket session bridged to its parked run');
      this.opened(link);
    } else if (outcome === 'unreachable') {
      this.log().warn({ holder }, 'the replica holding the parked run did not answer: closing 1012');
      this.close(RUN_UNREACHABLE);
    } else {
      this.launch(request, workflowId, actor);
    }
  }

  private launch(request: StartWorkflowRequest, workflowId: string, actor: string | undefined): void {
    const before = this.phase;
    if (before.state !== 'starting' && before.state !== 'claiming') return;
    const run = new ClientRun(workflowId, actor, this, this.deps.parked, this.deps.settings, this.deps.metrics);
    const gone = new AbortController();
    this.phase = { state: 'opening', workflowId, early: before.early, run, gone, parked: false };
    const start = { ...this.auth, auth: { ...this.auth.auth, WorkflowID: workflowId }, request, signal: gone.signal };
    this.deps.launcher.launch({ ...start, transport: 'websocket', sink: run }).then(
      ({ run: opened }) => this.launched(run, opened),
      (err: unknown) => {
        const error = err instanceof GatewayError ? err : new GatewayError('INTERNAL', 'internal error', { cause: err });
        if (error.code === 'INTERNAL') this.log().error({ err }, 'websocket session could not start');
        this.deps.metrics.connectionError('websocket', error.errorType);
        const close = closeForRefusal(error.code, error.message);
        // Its connection is told (this one, or one that re-attached while the run was being opened).
        run.abandon(close);
        this.close(close);
      },
    );
  }

  private launched(client: ClientRun, run: SessionRun): void {
    client.opened(run);
    this.runId = run.id;
    if (this.state === 'closed') {
      // The client left while the run was opening: parked if its connection was lost (and
      // another may have re-attached already), else the call is cancelled.
      if (!client.isParked && client.servedOn(this)) void run.stop(CLIENT_GONE);
      return;
    }
    this.opened(client);
  }

  /** The connection serves `client` from now on: the events that came meanwhile go to it, and its end closes the socket. */
  private opened(client: SessionClient): void {
    const before = this.phase;
    if (before.state === 'awaiting_start' || before.state === 'closed') return;
    this.phase = { state: 'open', workflowId: before.workflowId, client, handingBack: false };
    this.runId ??= client.runId;
    for (const event of 'early' in before ? before.early : []) client.fromClient(event);
    // A run here tells the connection serving it when it ends (runEnded).
    if (client instanceof SocketLink) void client.ended.then(({ close }) => this.endWith(close));
  }

  /** Connection: the run this connection serves has ended: the close its end chose. */
  runEnded(close: Close | undefined): void {
    this.endWith(close);
  }

  /** The run ended: the close its end chose; none when its client ended it (a socket still open — a client that stopped reading — is cut off). */
  private endWith(close: Close | undefined): void {
    if (close) this.close(close);
    else this.socket.terminate();
  }

  private stopRun(reason: StopReason): void {
    if (this.phase.state === 'open') this.phase.client.stop(reason);
  }

  /**
   * The connection is lost (no pong, a failed ping or write): the run is parked when it
   * can be, else stopped for `reason`; the socket is cut off.
   */
  private lost(reason: StopReason): void {
    const phase = this.phase;
    this.phase = { state: 'closed', workflowId: this.workflowId };
    if (phase.state === 'open' && !phase.client.park()) phase.client.stop(reason);
    if (phase.state === 'opening') this.leaveOpening(phase, true);
    if (phase.state === 'claiming') phase.link.abandon();
    this.socket.terminate();
  }

  /**
   * The connection goes while its run is being opened: lost, that run parks (docs/spec.md
   * §12) and the start goes on for the client's re-attach; else, or when it cannot park,
   * the launcher's caller signal is aborted.
   */
  private leaveOpening(opening: Extract<Phase, { state: 'opening' }>, lost: boolean): void {
    if (lost && !opening.parked && opening.run.park()) opening.parked = true;
    if (!opening.parked) opening.gone.abort();
  }

  private onClose(code: number): void {
    const phase = this.phase;
    this.phase = { state: 'closed', workflowId: this.workflowId };
    // No close frame, and none of ours: the connection was lost.
    if (phase.state === 'opening') this.leaveOpening(phase, code === 1006 && !this.handshake.sent);
    this.handshake.dispose();
    clearTimeout(this.startTimer);
    this.flow.wake();
    if (phase.state === 'claiming') phase.link.abandon();
    // Handed back to its holder by the drain (shutdownIdle), parked: not the client's end.
    if (phase.state !== 'open' || phase.handingBack) return;
    // A client's close frame 1000/1001 is a stop it asked for; another code ends the call.
    if (code === 1000 || code === 1001) phase.client.stop({ kind: 'client_closed', code });
    // No close frame at all (1006): the connection was lost, and the run waits for its client.
    else if (code !== 1006 || !phase.client.park()) phase.client.stop(CLIENT_GONE);
  }

  /** Counts a frame that will wait for the run (kept in `early`); past EARLY_BYTES the connection is closed 1008, and true. */
  private floodingEarly(bytes: number): boolean {
    const { state } = this.phase;
    if (state !== 'starting' && state !== 'claiming' && state !== 'opening') return false;
    this.earlyBytes += bytes;
    if (this.earlyBytes <= EARLY_BYTES) return false;
    this.log().warn({ bytes: this.earlyBytes }, 'websocket client sent too much before its run started: closing');
    this.close(EARLY_FLOOD);
    return true;
  }

  /** Counts a heartbeat; true once the client sends more than the bound in one second. */
  private flooding(): boolean {
    const now = Date.now();
    if (now - this.heartbeatWindow >= 1_000) {
      this.heartbeatWindow = now;
      this.heartbeats = 0;
    }
    this.heartbeats += 1;
    return this.heartbeats > MAX_HEARTBEATS_PER_SECOND;
  }

  /**
   * Liveness, from the route's tick (docs/spec.md §11): a ping every pingMs; no pong
   * within pongTimeoutMs of the last one (pongs only reset it, as Workhorse's read
   * deadline) is a lost connection, as is a ping that cannot be written.
   */
  checkLiveness(now: number): void {
    if (this.state === 'closed' || this.socket.readyState !== this.socket.OPEN) return;
    if (now - this.pongAt > this.deps.settings.pongTimeoutMs) {
      this.lost(PONG_TIMEOUT);
      return;
    }
    if (now - this.pingedAt < this.deps.settings.pingMs) return;
    this.pingedAt = now;
    this.socket.ping(undefined, undefined, (err) => {
      if (err && this.state !== 'closed') this.lost(PING_FAILED);
    });
  }

  /** Sends the close frame; a client that does not answer it within the close timeout is cut off. */
  private close(close: Close): void {
    this.handshake.send(close);
  }

  private log(): Logger {
    return this.deps.logger.child({ ...correlation(this.auth.requestId), workflow_id: this.workflowId, transport: 'websocket', ...this.span.logFields });
  }
}

/** The one event a decoded ClientEvent carries (other than a start), as the stream writes it. */
function clientEvent(decoded: DecodedClientEvent): ClientEvent | undefined {
  if (decoded.actionResponse) return { actionResponse: decoded.actionResponse };
  if (decoded.heartbeat) return { heartbeat: { timestamp: decoded.heartbeat.timestamp ?? '0' } };
  if (decoded.stopWorkflow) return { stopWorkflow: { reason: decoded.stopWorkflow.reason ?? '' } };
  return undefined;
}

/** Who a connection is for, as a re-attach must match it (docs/spec.md §12): ActorID, else the cloud-connector user id. */
function actorOf(auth: SessionAuth): string | undefined {
  const actor = auth.auth.ActorID ?? auth.auth.Service.Headers?.['x-gitlab-global-user-id'];
  return actor ? actor : undefined;
}
