/**
 * The run part, wired from its settings: the launcher every transport starts runs with, and
 * what every run of the process shares — the run limits' one timer, the stop words, the
 * budget that bounds segment-end callbacks.
 */
import { setMaxListeners } from 'node:events';
import type { Closables } from '../core/closables';
import { Launcher, type LauncherDeps } from './launcher';
import { RunLimits } from './run-limits';
import type { RunSettings } from './settings';
import { StopReasons } from './stop-reasons';

export interface RunPartDeps extends Omit<LauncherDeps, 'runLimits' | 'stopReasons' | 'callbackSignal'> {
  /** Segment-end callbacks in flight at once (OwnerSettings.callbackConcurrency). */
  callbackConcurrency: number;
  closables: Closables;
}

export interface RunPart {
  launcher: Launcher;
  /** Bounds segment-end callbacks: aborted when the drain's budget is spent, and at close. */
  callbackBudget: AbortController;
  /** Run limits pending, and entries queued with struck-off ones (/debug/structures). */
  held(): { run_limits: number; run_limits_queued: number };
}

export function createRun(settings: RunSettings, deps: RunPartDeps): RunPart {
  const { closables, callbackConcurrency, ...launcherDeps } = deps;
  deps.metrics.maxDetachedRuns.set(settings.maxDetachedRuns);
  const callbackBudget = new AbortController();
  // Every callback in flight (at most callbackConcurrency, each request or retry wait
  // with one abort listener) and the waiting line (one) listen to this signal: more than
  // Node's default of 10 is the design, not a leak, and would be warned about on every
  // drain. Past this bound the warning still means what it says.
  setMaxListeners(callbackConcurrency + 1, callbackBudget.signal);
  const stopReasons = new StopReasons(settings.workflowInfraStopReasons);
  // Said once: an operator reading why a run limit sent WORKHORSE_SERVER_SHUTDOWN finds it here.
  deps.logger.info({ service_allowlist: settings.workflowInfraStopReasons, ...stopReasons.infraWords }, 'stop words in force (LONGRUN_WORKFLOW_INFRA_STOP_REASONS)');
  const runLimits = closables.add('run limits', new RunLimits(settings.runLimitMs), (l) => l.close());
  const launcher = new Launcher(settings, { ...launcherDeps, runLimits, stopReasons, callbackSignal: callbackBudget.signal });
  return { launcher, callbackBudget, held: () => ({ run_limits: runLimits.size, run_limits_queued: runLimits.queued }) };
}
