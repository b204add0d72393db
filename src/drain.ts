/**
 * The drain (docs/spec.md §7): what SIGTERM does to the runs in flight. The gateway has
 * already gone not-ready and answers new executes 503 DRAINING; after the shutdown delay
 * every run in flight is stopped with WORKHORSE_SERVER_SHUTDOWN, concurrently, within
 * the drain budget; segment-end callbacks are sent while the budget lasts; then the
 * gateway closes whatever is left in what remains of the budget, while the spans are
 * flushed (at most a second of it). The drain is one span, each run it stopped an event.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { readMs, readMsOrZero, type Env } from './core/env';
import type { Logger } from './core/log';
import type { Metrics } from './observability/metrics';
import type { Tracing } from './observability/tracing';
import type { RegisteredRun, RunRegistry } from './run/registry';
import type { EndReason } from './core/vocabulary';

/** The drain section of the configuration (docs/configuration.md "Draining"). */
export interface DrainSettings {
  /** SIGTERM: how long to wait (readiness already 503) before stopping runs. */
  shutdownDelayMs: number;
  /** The drain budget: stopping every run, releasing locks, sending callbacks. */
  timeoutMs: number;
  /** Of the drain budget, what is kept for lock release and callbacks after the stops. */
  reserveMs: number;
}

export function readDrainSettings(env: Env): DrainSettings {
  return {
    shutdownDelayMs: readMsOrZero(env, 'LONGRUN_SHUTDOWN_DELAY_MS', 0),
    // 8 s fits a drain inside Kubernetes' default 10 s SIGTERM→SIGKILL window.
    timeoutMs: readMs(env, 'LONGRUN_DRAIN_TIMEOUT_MS', 8_000),
    // 2 s after the stops leave room for 10 000 lock releases and callbacks (BENCHMARKS.md drain).
    reserveMs: readMsOrZero(env, 'LONGRUN_DRAIN_RESERVE_MS', 2_000),
  };
}

export interface DrainDeps {
  settings: DrainSettings;
  /** The stop handshake's wait (LONGRUN_STOP_ACK_TIMEOUT_MS): a drain's is never longer. */
  stopAckTimeoutMs: number;
  logger: Logger;
  metrics: Metrics;
  registry: RunRegistry;
  /** WebSocket sessions: those that opened no run yet are closed at once (1001), bridged ones handed back (1012). */
  websockets: { shutdownIdle(): Promise<void> };
  /** Follow streams (docs/spec.md §14): ended once the runs are stopped (their ends sent), so each client resumes elsewhere. */
  follow: { endAll(why: 'drain'): void };
  /** Bounds segment-end callbacks; aborted shortly before the budget ends. */
  callbackBudget: AbortController;
  tracing: Tracing;
  /** Closes every part of the gateway within `timeoutMs` (runs still in flight are cancelled). */
  close(timeoutMs: number): Promise<'closed' | 'forced'>;
}

/** Callbacks are aborted this long before the drain budget ends, so exit is on time. */
const CALLBACK_ABORT_MARGIN_MS = 250;
/** After a drain, closing gets at least this long even when the budget is spent. */
const MIN_CLOSE_AFTER_DRAIN_MS = 250;
/** The most of the drain budget the last spans' export may take (docs/spec.md §13): a collector that does not answer costs no more. */
const TRACE_FLUSH_MS = 1_000;

export async function drain(deps: DrainDeps): Promise<void> {
  const { settings, metrics, logger, registry, callbackBudget, tracing } = deps;
  metrics.draining.set(1);
  const started = Date.now();
  const span = tracing.drain(registry.size);
  metrics.drainDeadline.set((started + settings.shutdownDelayMs + settings.timeoutMs) / 1000);
  logger.info({ runs: registry.size }, 'drain started');
  if (settings.shutdownDelayMs > 0) await sleep(settings.shutdownDelayMs);
  const budgetMs = settings.timeoutMs;
  const budgetEnd = Date.now() + budgetMs;
  // Leave part of the budget for lock release and segment-end callbacks after the stops.
  const ackTimeoutMs = Math.min(deps.stopAckTimeoutMs, Math.max(Math.floor(budgetMs / 2), budgetMs - settings.reserveMs));
  const callbackDeadline = setTimeout(() => callbackBudget.abort(), Math.max(0, budgetMs - CALLBACK_ABORT_MARGIN_MS));
  // While the runs are stopped, errors carry their message but no stack frames: every
  // acknowledged stop ends its call UNAVAILABLE, and grpc-js builds an error for each
  // from two fresh Errors whose stacks it formats — a tenth of a drain's CPU, for errors
  // nobody reads. (A per-call interceptor would do it for every call, but costs ~450
  // bytes per held run.)
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  const handedBack = deps.websockets.shutdownIdle();
  const onEnded = tracing.enabled
    ? (run: RegisteredRun, reason: EndReason): void => tracing.drainStopped(span, { workflowId: run.workflowId, runId: run.id, transport: run.transport }, reason)
    : undefined;
  const stops = Promise.all([registry.stopAll({ kind: 'drain', ackTimeoutMs }, onEnded), handedBack]);
  let budgetTimer: NodeJS.Timeout | undefined;
  const budget = new Promise<'over'>((resolve) => (budgetTimer = setTimeout(() => resolve('over'), budgetMs)));
  const outcome = await Promise.race([stops.then(() => 'done' as const), budget]);
  Error.stackTraceLimit = stackTraceLimit;
  clearTimeout(budgetTimer);
  deps.follow.endAll('drain');
  clearTimeout(callbackDeadline);
  tracing.drainEnded(span, outcome, registry.size);
  // Whatever is still open (a hung owner, a paused Redis) gets what is left of the budget
  // to close, then is destroyed: the process exits on time in every case. The spans go
  // out meanwhile, within the same time (and never more than a second of it).
  const closeMs = Math.max(MIN_CLOSE_AFTER_DRAIN_MS, budgetEnd - Date.now());
  const [closed] = await Promise.all([deps.close(closeMs), tracing.flush(Math.min(TRACE_FLUSH_MS, closeMs))]);
  logger.info({ drain_ms: Date.now() - started, outcome, runs_left: registry.size, close: closed }, 'drain finished');
}
