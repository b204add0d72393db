/**
 * GitLab fails a workflow that stays `created` or `running` for 30 minutes without an update
 * (ee/app/services/ai/duo_workflows/clean_stuck_workflows_service.rb: EXPIRATION_IN_MINUTES,
 * on the workflow's updated_at, which every checkpoint touches). Every longrun setting that
 * bounds a stretch in which nothing may update the workflow defaults below that, each named
 * here with what it bounds; and the longest such stretch longrun's defaults allow at a
 * segment boundary — a run silent to its limit, its stop, its callback, a re-dispatch the
 * owner rate-limits to the last attempt, the next start — fits in it too.
 */
import { describe, expect, it } from 'vitest';
import { defaultRetryOptions, LongrunError } from '@longrun/client';
import { segmentBackoffMs } from '../../examples/dispatcher/dispatcher';
import { loadConfig } from '../../src/config';
import { RAILS_EXECUTE_RATE_LIMIT } from '../../sandbox/owner-sim';

/** CleanStuckWorkflowsService::EXPIRATION_IN_MINUTES. */
const GITLAB_STUCK_AFTER_MS = 30 * 60_000;

/** The defaults, as loadConfig applies them (no variable set). */
const config = loadConfig({});

/** Each setting, what it bounds, and its default. */
const BOUNDS: Array<[variable: string, bounds: string, defaultMs: number]> = [
  ['LONGRUN_RUN_LIMIT_MS', 'a detached run that sends nothing the owner records, to its stop', config.run.runLimitMs],
  ['LONGRUN_WS_RESUME_WINDOW_MS', 'a parked WebSocket run waiting for its client (its backlog is kept that long at most)', config.websocket.resumeWindowMs],
  ['LONGRUN_WS_START_TIMEOUT_MS', 'a connected session before its start', config.websocket.startTimeoutMs],
  ['LONGRUN_ACCEPT_WAIT_MS', 'a detached start waiting for its first action', config.run.acceptWaitMs],
  ['LONGRUN_STOP_ACK_TIMEOUT_MS', 'the stop handshake before a run ends and calls back', config.run.stopAckTimeoutMs],
  ['LONGRUN_LEASE_TTL_MS', 'a dead holder’s lock keeping the next segment out', config.coordination.leaseTtlMs],
  ['LONGRUN_STOP_KEY_TTL_MS', 'a stop key refusing new starts', config.coordination.stopKeyTtlMs],
  [
    'LONGRUN_CALLBACK_TIMEOUT_MS × LONGRUN_CALLBACK_ATTEMPTS',
    'the segment-end callback that triggers the re-dispatch',
    config.owner.callbackTimeoutMs * config.owner.callbackAttempts,
  ],
  ['LONGRUN_CALLER_STALL_MS', 'a blocking caller that reads nothing', config.run.callerStallMs],
  ['LONGRUN_WS_PONG_TIMEOUT_MS', 'a silent WebSocket client before its run parks', config.websocket.pongTimeoutMs],
  ['LONGRUN_WS_WRITE_TIMEOUT_MS', 'a WebSocket client that takes nothing before its run parks', config.websocket.writeTimeoutMs],
  ['LONGRUN_MCP_TIMEOUT_MS', 'one MCP tool call', config.mcp.callTimeoutMs],
  ['@longrun/client retry deadlineMs', 'a dispatcher’s execute retrying one segment', defaultRetryOptions.deadlineMs],
];

/**
 * The reference dispatcher's waits between a segment job's attempts (8 by default) when each
 * is refused with Rails' Retry-After: the client gives up at once (the wait ends past its
 * deadline) and the job's backoff waits it out.
 */
function rateLimitedRedispatchMs(attempts = 8): number {
  const refused = new LongrunError('PREAUTH_DENIED', 'rate limited', { status: 429, retryable: true, retryAfterS: RAILS_EXECUTE_RATE_LIMIT.intervalMs / 1_000 });
  let total = 0;
  for (let made = 1; made < attempts; made++) total += segmentBackoffMs(made, refused);
  return total;
}

describe('what bounds a stretch without a workflow update, against GitLab’s 30 min', () => {
  it.each(BOUNDS)('%s (%s) defaults below it', (_variable, _bounds, defaultMs) => {
    expect(defaultMs).toBeGreaterThan(0);
    expect(defaultMs).toBeLessThan(GITLAB_STUCK_AFTER_MS);
  });

  it('a segment boundary at its worst fits too: silent to the run limit, stopped, called back, re-dispatched through every rate-limited attempt, accepted', () => {
    // Rails' Retry-After ends past the client's deadline: the client does not wait within an attempt.
    expect(RAILS_EXECUTE_RATE_LIMIT.intervalMs).toBeGreaterThan(defaultRetryOptions.deadlineMs);
    const redispatch = rateLimitedRedispatchMs();
    // The dispatcher spends its attempts in minutes, not in a second half-hour.
    expect(redispatch).toBeLessThan(10 * 60_000);
    const boundary = config.run.runLimitMs + config.run.stopAckTimeoutMs + config.owner.callbackTimeoutMs * config.owner.callbackAttempts + redispatch + config.run.acceptWaitMs;
    expect(boundary).toBeLessThan(GITLAB_STUCK_AFTER_MS);
  });
});
