/** The WebSocket section of the configuration (docs/configuration.md "WebSocket sessions"): liveness, parking and its backlogs, the cap, the Origin check. */
import { z } from 'zod';
import { count, read, readFlag, readMs, readMsOrZero, type Env } from '../core/env';

export interface WebSocketSettings {
  /** A ping this often; no pong for pongTimeoutMs ends the session (docs/spec.md §11). */
  pingMs: number;
  pongTimeoutMs: number;
  /** A client that takes nothing written to it for this long is gone; a close frame gets closeTimeoutMs. */
  writeTimeoutMs: number;
  closeTimeoutMs: number;
  /** A client that sends no startRequest this long after the upgrade is closed 1008. */
  startTimeoutMs: number;
  /** A run whose connection is lost waits this long for its client (0: stopped at once, as Workhorse). */
  resumeWindowMs: number;
  /** Bytes of frames a parked run keeps for its client; past them it is stopped. */
  backlogBytes: number;
  /** Bytes of frames every parked run of the process keeps together; past them a parked run that grows its backlog is stopped. */
  backlogBudgetBytes: number;
  /** Sessions at once in this process (503 before the upgrade when full). */
  maxSessions: number;
  /** Origins allowed besides the request's own host (scheme://host[:port], lower case). */
  allowedOrigins: readonly string[];
  /** Check a browser's Origin against X-Forwarded-Host (behind a proxy that sets it) instead of Host. */
  trustForwardedHost: boolean;
}

/** LONGRUN_WS_ALLOWED_ORIGINS: `scheme://host[:port]` origins, normalised as browsers send them. */
const originList = z.string().transform((text, ctx) => {
  const origins: string[] = [];
  for (const item of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    let url: URL;
    try {
      url = new URL(item);
    } catch {
      ctx.addIssue({ code: 'custom', message: `not an origin: ${item}` });
      return z.NEVER;
    }
    if (url.origin === 'null' || url.pathname !== '/' || url.search || url.hash || item.replace(/\/$/, '').toLowerCase() !== url.origin) {
      ctx.addIssue({ code: 'custom', message: `not an origin: ${item}` });
      return z.NEVER;
    }
    origins.push(url.origin);
  }
  return origins;
});

export function readWebSocketSettings(env: Env): WebSocketSettings {
  return {
    pingMs: readMs(env, 'LONGRUN_WS_PING_MS', 20_000),
    pongTimeoutMs: readMs(env, 'LONGRUN_WS_PONG_TIMEOUT_MS', 30_000),
    writeTimeoutMs: readMs(env, 'LONGRUN_WS_WRITE_TIMEOUT_MS', 60_000),
    closeTimeoutMs: readMs(env, 'LONGRUN_WS_CLOSE_TIMEOUT_MS', 5_000),
    startTimeoutMs: readMs(env, 'LONGRUN_WS_START_TIMEOUT_MS', 60_000),
    resumeWindowMs: readMsOrZero(env, 'LONGRUN_WS_RESUME_WINDOW_MS', 60_000, 'off'),
    backlogBytes: read(env, 'LONGRUN_WS_BACKLOG_BYTES', count, 'a non-negative integer number of bytes', 8 * 1024 * 1024),
    // 32 full backlogs: a pod's parked runs hold at most this much of what the service
    // sent them, whatever their count (size it with the memory limit: docs/deploying.md).
    backlogBudgetBytes: read(env, 'LONGRUN_WS_BACKLOG_BUDGET_BYTES', count, 'a non-negative integer number of bytes', 256 * 1024 * 1024),
    maxSessions: read(env, 'LONGRUN_MAX_WS_SESSIONS', count, 'a non-negative integer', 10_000),
    allowedOrigins: read(env, 'LONGRUN_WS_ALLOWED_ORIGINS', originList, 'a comma-separated list of origins (scheme://host[:port])', []),
    trustForwardedHost: readFlag(env, 'LONGRUN_TRUST_FORWARDED_HOST', false),
  };
}
