/** The run section of the configuration (docs/configuration.md "Runs"): a run's start, its limits, its stop, and the caps of the process. */
import { z } from 'zod';
import { count, read, readMs, type Env } from '../core/env';
import { SERVER_SHUTDOWN, STOP_REASON_TOKEN, publicInfraStopReasons } from './stop-reasons';

export interface RunSettings {
  /** Detached: the longest wait for the first action before the 202. */
  acceptWaitMs: number;
  /** How long the service may take to open a stream and take the startRequest. */
  streamOpenTimeoutMs: number;
  /** Blocking: a caller that takes no line for this long is treated as gone. */
  callerStallMs: number;
  /** Detached: a run is stopped this long after its start. */
  runLimitMs: number;
  /** The stop handshake's wait for the call to end. */
  stopAckTimeoutMs: number;
  maxDetachedRuns: number;
  /** Runs of one actor across replicas (0: no cap). */
  maxRunsPerActor: number;
  /**
   * LONGRUN_WORKFLOW_INFRA_STOP_REASONS: the stop words the workflow service treats as
   * infrastructure stops (it keeps the workflow `running`); longrun's own stops use the
   * most specific of them (docs/spec.md §4). Always holds WORKHORSE_SERVER_SHUTDOWN.
   */
  workflowInfraStopReasons: readonly string[];
}

/** LONGRUN_WORKFLOW_INFRA_STOP_REASONS: every workflow service allowlists the shutdown word, and the drain relies on it. */
const stopWordList = z
  .string()
  .transform((text) => [
    ...new Set(
      text
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ])
  .pipe(z.array(z.string().regex(STOP_REASON_TOKEN)).refine((words) => words.includes(SERVER_SHUTDOWN)));

export function readRunSettings(env: Env): RunSettings {
  return {
    acceptWaitMs: readMs(env, 'LONGRUN_ACCEPT_WAIT_MS', 10_000),
    // A connection (TLS included) takes well under a second; a service that accepts TCP
    // and never speaks HTTP/2 must not hold the caller for the whole accept wait.
    streamOpenTimeoutMs: readMs(env, 'LONGRUN_STREAM_OPEN_TIMEOUT_MS', 5_000),
    // Three keepalive periods: a caller reading nothing for a minute is not coming back.
    callerStallMs: readMs(env, 'LONGRUN_CALLER_STALL_MS', 60_000),
    // 20 min: GitLab fails a workflow left `running` 30 min without an update
    // (CleanStuckWorkflowsService), and a run silent to its limit, then a rate-limited
    // re-dispatch, must fit in that (test/unit/stuck-workflow-bounds.test.ts); also well
    // below the workflow service's one-hour stream cap and two-hour token TTL.
    runLimitMs: readMs(env, 'LONGRUN_RUN_LIMIT_MS', 1_200_000),
    stopAckTimeoutMs: readMs(env, 'LONGRUN_STOP_ACK_TIMEOUT_MS', 10_000),
    maxDetachedRuns: read(env, 'LONGRUN_MAX_DETACHED_RUNS', count, 'a non-negative integer', 10_000),
    maxRunsPerActor: read(env, 'LONGRUN_MAX_RUNS_PER_ACTOR', count, 'a non-negative integer (0 = off)', 0),
    workflowInfraStopReasons: read(
      env,
      'LONGRUN_WORKFLOW_INFRA_STOP_REASONS',
      stopWordList,
      `a comma-separated list of stop words [A-Z][A-Z0-9_]{0,63} that holds ${SERVER_SHUTDOWN}`,
      [...publicInfraStopReasons],
    ),
  };
}
