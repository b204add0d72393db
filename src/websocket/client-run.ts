/**
 * A WebSocket session's run, apart from the connection it is served on (docs/spec.md §12):
 * what lets a run outlive its connection. It is the run's ActionSink: every action for
 * the client goes to the connection attached now, or — while none is (the run is parked,
 * its connection lost) — into a backlog, in order, bounded by LONGRUN_WS_BACKLOG_BYTES,
 * and with every other parked run's by LONGRUN_WS_BACKLOG_BUDGET_BYTES (backlog-budget.ts).
 * It remembers the actions the client was sent and has not answered, so a connection that
 * re-attaches gets, in their order, those and then the backlog, then the live stream.
 * A checkpoint written to a lost connection is not sent again (nothing tells what a dead
 * socket delivered, and an incremental checkpoint must not be applied twice).
 *
 * A parked run whose window ends, whose backlog overflows (its own bound, or the process's
 * budget), or whose workflow another start takes over is stopped with WORKHORSE_WEBSOCKET_PING_FAILED: an infrastructure
 * reason the public service allows, so the workflow stays resumable.
 */
import type { TraceLink } from '../observability/tracing';
import type { SessionRun } from '../run/launcher';
import type { ActionSink } from '../run/run';
import { STOPS, type StopReason } from '../run/stop-reasons';
import type { ParkEndReason } from './words';
import type { BacklogBudget } from './backlog-budget';
import { LateSink } from './bridge/late-answers';
import { closeForRunEnd, type Close } from './close-codes';
import type { WebSocketMetrics } from './metrics';
import { workhorseActionJson } from '../workflow/action-line';
import type { Action, ClientEvent } from '../workflow/contract';

/** The connection a run is served on now (connection.ts; holder-link.ts for a socket on another replica). */
export interface Connection {
  sendFrame(frame: Buffer): 'ok' | 'full' | 'gone';
  drained(): Promise<void>;
  readonly stallMs: number;
  /**
   * The run has ended (or will never open): told to the connection serving it then, once,
   * with the close its end chose (undefined: cut the socket off, its client ended it). A
   * connection is told nothing after it stopped serving the run (lost, taken over): nothing
   * of the run keeps a connection that is gone — a client reconnecting every few seconds to
   * an hour-long run left every connection it had held until the run ended.
   */
  runEnded(close: Close | undefined): void;
}

export interface ClientRunSettings {
  /** How long a run waits parked for its client; 0: never parked (Workhorse). */
  resumeWindowMs: number;
  backlogBytes: number;
  /** The process's budget for every parked run's backlog together. */
  backlogBudget: BacklogBudget;
}

/** Parked runs by workflow: where a re-attaching start finds its run — here, or through a bridge (src/websocket/bridge/). */
export type ParkedRuns = Map<string, ClientRun>;

/** Answered requestIDs remembered per run (a turn's actions since the last re-attach, and then some). */
const ANSWERED_KEPT = 1_024;

/** How longrun stops a parked run it gives up on: WORKHORSE_WEBSOCKET_PING_FAILED (resumable). */
const PARKED_RUN_ENDED = STOPS.ping_failed;

export class ClientRun implements ActionSink {
  private run: SessionRun | undefined;
  private connection: Connection | undefined;
  /** Actions for the client without an answer yet, by requestID, in the order they came: their frames. */
  private readonly unanswered = new Map<string, Buffer>();
  /**
   * requestIDs whose answer was passed on, the latest ANSWERED_KEPT: a client that answers
   * an action again (its answer crossed the replay of that action on a re-attach) is not
   * passed on twice — the service would fail the call on a requestID it no longer waits for.
   */
  private answered: Set<string> | undefined;
  /** Frames emitted while parked, in order, and their bytes. */
  private backlog: Buffer[] = [];
  private backlogSize = 0;
  private parkedAt: number | undefined;
  private window: NodeJS.Timeout | undefined;
  /** Set once a parked run was told to stop: counted once. */
  private stopping = false;
  /** Set once the run has ended, or will never open (its launch failed): it can no longer be parked. */
  private finished = false;
  /** Where a given-up bridge's late answers go (late-answers.ts): made when first asked for, cut when the run ends. */
  private late: LateSink | undefined;

  constructor(
    readonly workflowId: string,
    /** Who the run is for (ActorID, else x-gitlab-global-user-id): only they may re-attach. */
    readonly actor: string | undefined,
    connection: Connection,
    private readonly parked: ParkedRuns,
    private readonly settings: ClientRunSettings,
    private readonly metrics: WebSocketMetrics,
  ) {
    this.connection = connection;
  }

  /** The run's sink for late answers: it lets the run go once the run has ended. */
  get lateSink(): LateSink {
    this.late ??= new LateSink(this.finished ? undefined : this);
    return this.late;
  }

  get stallMs(): number | undefined {
    return this.connection?.stallMs;
  }

  /** The run, once the launcher opened it. */
  opened(run: SessionRun): void {
    this.run = run;
    void run.done.then((result) => this.ended(closeForRunEnd(result)));
    // Lost while it was being opened: parked already, or given up on.
    if (this.parkedAt !== undefined) run.noteParked(this.parkedAt, this.settings.resumeWindowMs);
    if (this.stopping) void run.stop(PARKED_RUN_ENDED);
  }

  /** The run's id, once it opened. */
  get runId(): string | undefined {
    return this.run?.id;
  }

  /** The correlation id of the session that started the run, once it opened. */
  get requestId(): string | undefined {
    return this.run?.requestId;
  }

  /** The run's span, for a connection that re-attaches to link to. */
  get traceLink(): TraceLink | undefined {
    return this.run?.traceLink;
  }

  /** Whether `connection` is the one the run is served on now (not parked, not taken over). */
  servedOn(connection: Connection): boolean {
    return this.connection === connection;
  }

  get isParked(): boolean {
    return this.parkedAt !== undefined;
  }

  /** ActionSink: to the attached connection, or into the backlog while parked. */
  write(action: Action): 'ok' | 'full' | 'gone' {
    const frame = Buffer.from(JSON.stringify(workhorseActionJson(action)));
    if (action.action !== 'newCheckpoint' && action.requestID) this.unanswered.set(action.requestID, frame);
    if (this.connection) return this.connection.sendFrame(frame);
    this.backlog.push(frame);
    this.backlogSize += frame.length;
    this.metrics.websocketBacklogBytes.inc(frame.length);
    const withinBudget = this.settings.backlogBudget.take(frame.length);
    if (this.backlogSize > this.settings.backlogBytes) void this.stopParked('backlog_full');
    else if (!withinBudget) void this.stopParked('backlog_budget');
    return 'ok';
  }

  drained(): Promise<void> {
    return this.connection ? this.connection.drained() : Promise.resolve();
  }

  /** The client's event for the service; its answer takes the action off the unanswered list. */
  fromClient(event: ClientEvent): boolean {
    if ('actionResponse' in event) {
      const requestId = event.actionResponse.requestID ?? '';
      if (!this.unanswered.delete(requestId) && this.answered?.has(requestId)) return true;
      this.answered ??= new Set();
      this.answered.add(requestId);
      if (this.answered.size > ANSWERED_KEPT) this.answered.delete(this.answered.values().next().value as string);
    }
    return this.run?.fromClient(event) ?? false;
  }

  stop(reason: StopReason): void {
    void this.run?.stop(reason);
  }

  /** The connection was lost: park for the resume window; false when parking is off (the caller stops the run). */
  park(): boolean {
    // An ended run whose client went before the close (no answer to the close frame: cut off, 1006) has nothing to wait for.
    // A run still being opened parks too (its record is written once it is open).
    if (this.parkedAt !== undefined) return true;
    if (this.settings.resumeWindowMs === 0 || this.finished) return false;
    this.connection = undefined;
    this.parkedAt = Date.now();
    this.parked.set(this.workflowId, this);
    this.run?.noteParked(this.parkedAt, this.settings.resumeWindowMs);
    this.metrics.websocketParked.inc();
    this.window = setTimeout(() => this.stopParked('expired'), this.settings.resumeWindowMs);
    return true;
  }

  /**
   * Stops a parked run longrun gave up on: its window ended, its backlog overflowed (its own
   * bound or the process's budget), or a start that may not re-attach (new input, another
   * actor or none) takes the workflow.
   * Resolves once it has ended (its lock released).
   */
  async stopParked(why: ParkEndReason): Promise<void> {
    if (!this.stopping) {
      this.stopping = true;
      this.metrics.websocketParkEnd(why);
      this.run?.noteParkEnd(why);
    }
    await this.run?.stop(PARKED_RUN_ENDED);
  }

  /** Whether a start of `actor` may take this parked run over: the run's own actor, and no new input (a goal, an approval). */
  resumableBy(actor: string | undefined, carriesInput: boolean): boolean {
    return this.isParked && actor !== undefined && actor !== '' && actor === this.actor && !carriesInput;
  }

  /**
   * A new connection takes the parked run over: it is sent every action sent before the
   * loss and not answered, then the backlog, in order; the live stream follows.
   * `bridgedFrom`: the replica holding the connection's socket, when it is not this one;
   * `by`: the connection's session span (the run's span links to it).
   */
  attach(connection: Connection, bridgedFrom?: string, by?: TraceLink): void {
    if (this.parkedAt === undefined) return;
    clearTimeout(this.window);
    const lostFor = Date.now() - this.parkedAt;
    this.parkedAt = undefined;
    this.parked.delete(this.workflowId);
    this.connection = connection;
    this.run?.noteParked(undefined, this.settings.resumeWindowMs, bridgedFrom, by);
    const queued = new Set(this.backlog);
    const replay = [...[...this.unanswered.values()].filter((f) => !queued.has(f)), ...this.backlog];
    this.releaseBacklog();
    for (const frame of replay) connection.sendFrame(frame);
    this.metrics.websocketReattached(bridgedFrom === undefined ? 'local' : 'bridged', lostFor / 1000);
  }

  /**
   * The launch failed (`close`: how its refusal closes a session): there is no run, and there
   * will be none. Parked meanwhile (the connection was lost while the run was being opened),
   * it leaves the parked runs at once — else it held its slot, and a resume start of its
   * workflow attached to nothing; a connection re-attached meanwhile is closed as its start's.
   */
  abandon(close: Close): void {
    if (this.run) return;
    this.ended(close);
  }

  /** The run has ended, or will never open: everything is given back, and the connection serving it, if any, is told `close`. */
  private ended(close: Close | undefined): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.window);
    if (this.parked.get(this.workflowId) === this) this.parked.delete(this.workflowId);
    this.releaseBacklog();
    this.unanswered.clear();
    this.answered = undefined;
    this.late?.cut();
    this.connection?.runEnded(close);
  }

  /** The backlog was replayed or dropped: its bytes leave the gauge and the process's budget. */
  private releaseBacklog(): void {
    this.metrics.websocketBacklogBytes.dec(this.backlogSize);
    this.settings.backlogBudget.give(this.backlogSize);
    this.backlog = [];
    this.backlogSize = 0;
  }
}
