/**
 * The reference dispatcher's own small state in Redis — what a real owner keeps in its
 * database: per workflow, the open turn (its request, status, current run, counters), and
 * per run, whether it is the turn's and how it ended. Every transition is one Lua script
 * (this folder's *.lua), so the callback endpoint, the queue worker and the watchdog may
 * race on the same run and each step still happens once.
 */
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type { InFlightEntry } from '@longrun/client';
import { fromRoot } from '../../src/core/paths';

export type TurnStatus = 'dispatching' | 'running' | 'finished' | 'stopped' | 'failed';

/** What a turn's request looks like: the StartWorkflowRequest fields the owner sends. */
export interface TurnRequest {
  goal?: string;
  /** Put in workflowMetadata (as JSON), with `resume` added for every segment after the first. */
  metadata?: Record<string, unknown>;
}

export interface Turn {
  workflowId: string;
  status: TurnStatus;
  /** The run the turn waits on ('' before the first is accepted). */
  runId: string;
  request: TurnRequest;
  /** Runs accepted (or adopted) for the turn. */
  segments: number;
  /** Of those, the ones that resumed an earlier segment. */
  resumes: number;
  /** Resumable segment ends acted on: each owes exactly one resume. */
  boundaries: number;
  /** Of those, the ones the watchdog found (the callback never came). */
  recovered: number;
  /** Times the turn was ended (1 once ended). */
  finals: number;
  /** Runs that reported the turn's end (more than 1 = finished twice). */
  finalRuns: number;
  endedReason: string | undefined;
  startedAt: number;
  endedAt: number | undefined;
}

/** What a recorded run end means for the turn (advance-turn.lua). */
export interface Advance {
  action: 'resume' | 'final' | 'done' | 'pending';
  reason: string;
  inFlight: InFlightEntry[];
  /** Decided by this call; false when repeated (a "resume" is repeated so a failed enqueue can be retried). */
  first: boolean;
}

export type EndVia = 'callback' | 'watchdog' | 'execute';

interface Scripts {
  startTurn(turn: string, request: string, now: number): Promise<number>;
  acceptRun(turn: string, run: string, runId: string, workflowId: string, segment: number, now: number, resumed: string): Promise<number>;
  recordEnd(run: string, reason: string, inFlight: string, via: EndVia, now: number): Promise<number>;
  advanceTurn(turn: string, run: string, runId: string, now: number): Promise<[string, string, string, string]>;
  closeTurn(turn: string, status: TurnStatus, reason: string, now: number): Promise<number>;
}

const script = (name: string): string => readFileSync(fromRoot('examples', 'dispatcher', name), 'utf8');

export class OwnerState {
  private readonly redis: Redis & Scripts;

  constructor(
    redis: Redis,
    private readonly prefix = 'longrun-example',
  ) {
    redis.defineCommand('startTurn', { numberOfKeys: 1, lua: script('start-turn.lua') });
    redis.defineCommand('acceptRun', { numberOfKeys: 2, lua: script('accept-run.lua') });
    redis.defineCommand('recordEnd', { numberOfKeys: 1, lua: script('record-end.lua') });
    redis.defineCommand('advanceTurn', { numberOfKeys: 2, lua: script('advance-turn.lua') });
    redis.defineCommand('closeTurn', { numberOfKeys: 1, lua: script('close-turn.lua') });
    this.redis = redis as Redis & Scripts;
  }

  private turnKey(workflowId: string): string {
    return `${this.prefix}:turn:${workflowId}`;
  }

  private runKey(runId: string): string {
    return `${this.prefix}:run:${runId}`;
  }

  /** Opens a turn; false when one of the workflow is still open. */
  async startTurn(workflowId: string, request: TurnRequest): Promise<boolean> {
    return (await this.redis.startTurn(this.turnKey(workflowId), JSON.stringify(request), Date.now())) === 1;
  }

  async turn(workflowId: string): Promise<Turn | null> {
    const h = await this.redis.hgetall(this.turnKey(workflowId));
    if (!h['status']) return null;
    const n = (field: string): number => Number(h[field] ?? 0);
    return {
      workflowId,
      status: h['status'] as TurnStatus,
      runId: h['run_id'] ?? '',
      request: JSON.parse(h['request'] ?? '{}') as TurnRequest,
      segments: n('segments'),
      resumes: n('resumes'),
      boundaries: n('boundaries'),
      recovered: n('recovered'),
      finals: n('finals'),
      finalRuns: n('final_runs'),
      endedReason: h['ended_reason'],
      startedAt: n('started_at'),
      endedAt: h['ended_at'] === undefined ? undefined : n('ended_at'),
    };
  }

  /** The run is the turn's (accepted or adopted); false when it already was. */
  async acceptRun(workflowId: string, runId: string, segment: number, resumed: boolean): Promise<boolean> {
    return (await this.redis.acceptRun(this.turnKey(workflowId), this.runKey(runId), runId, workflowId, segment, Date.now(), resumed ? '1' : '0')) === 1;
  }

  /** Records a run's end (first report wins); false when one was already recorded. */
  async recordEnd(runId: string, reason: string, inFlight: InFlightEntry[], via: EndVia): Promise<boolean> {
    return (await this.redis.recordEnd(this.runKey(runId), reason, JSON.stringify(inFlight), via, Date.now())) === 1;
  }

  /** What the run's recorded end means for its turn, decided once (see advance-turn.lua). */
  async advance(workflowId: string, runId: string): Promise<Advance> {
    const [action, reason, inFlight, first] = await this.redis.advanceTurn(this.turnKey(workflowId), this.runKey(runId), runId, Date.now());
    return { action: action as Advance['action'], reason, inFlight: JSON.parse(inFlight) as InFlightEntry[], first: first === '1' };
  }

  /** Whether the run's end has been acted on. */
  async acted(runId: string): Promise<boolean> {
    return (await this.redis.hget(this.runKey(runId), 'acted')) === '1';
  }

  /** Ends a turn that has no run end to go by; false when it had already ended. */
  async closeTurn(workflowId: string, status: 'stopped' | 'failed', reason: string): Promise<boolean> {
    return (await this.redis.closeTurn(this.turnKey(workflowId), status, reason, Date.now())) === 1;
  }
}
