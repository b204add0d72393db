/**
 * What follows a run's end, once its reservation is given back (docs/spec.md §6, §7): the run's
 * metrics, its one log line, and — for an accepted detached run — the segment-end
 * callback that lets the owner dispatch the next segment.
 */
import type { InFlightEntry } from '@longrun/client';
import type { Logger } from '../core/log';
import type { TraceSpan } from '../observability/tracing';
import type { OwnerClient } from '../owner/owner-client';
import { segmentEndReason, type EndReason, type Transport } from '../core/vocabulary';
import type { StopOutcome } from '../workflow/workflow-stream';
import type { StreamEnd } from '../workflow/workflow-stream';
import type { RunMetrics } from './metrics';
import type { RunRegistry } from './registry';

export interface RunEnd {
  workflowId: string;
  runId: string;
  requestId: string;
  transport: Transport;
  reason: EndReason;
  /** The stop and an OK end crossed (end-decision.ts): said in the log line and the callback. */
  endedWhileStopping: boolean;
  end: StreamEnd;
  stopOutcome: StopOutcome | undefined;
  durationMs: number;
  actions: number;
  /** Actions relayed and still unanswered when the segment ended (docs/spec.md §6 `in_flight`). */
  inFlight: InFlightEntry[];
  /** Send the segment-end callback (accepted detached runs). */
  callback: boolean;
  /** The run's span: the callback's is its child. */
  span: TraceSpan;
}

export interface RunEndContext {
  metrics: RunMetrics;
  registry: RunRegistry;
  /** Counts the callbacks it sends (owner/metrics.ts). */
  owner: OwnerClient;
  /** Bounds the callback's attempts (aborted when a drain's budget runs out). */
  callbackSignal: AbortSignal;
  /** The process logger: its level decides whether a run's own logger is made at all. */
  logger: Logger;
}

/**
 * Records a run's end; `log` gives the run's own logger (workflow_id, run_id, request_id
 * bound), made only when a line is written: a drain ends thousands of runs at once.
 */
export async function recordRunEnd(ctx: RunEndContext, log: () => Logger, run: RunEnd): Promise<void> {
  const { metrics } = ctx;
  metrics.runClosed(run.transport, ctx.registry.count(run.transport));
  metrics.workflowCallEnded(run.end.code, run.transport, run.durationMs / 1000);
  metrics.teardown(run.transport, run.reason, run.endedWhileStopping);
  if (ctx.logger.isLevelEnabled('info')) {
    log().info(
      {
        reason: run.reason,
        duration_ms: run.durationMs,
        actions: run.actions,
        in_flight: run.inFlight.length,
        grpc_code: run.end.code,
        stop_outcome: run.stopOutcome,
        ...(run.endedWhileStopping ? { ended_while_stopping: true } : {}),
      },
      'run ended',
    );
  }
  if (!run.callback) return;
  const result = await ctx.owner.segmentEnd(
    {
      workflow_id: run.workflowId,
      run_id: run.runId,
      reason: segmentEndReason(run.reason),
      segment_duration_s: Math.round(run.durationMs / 100) / 10,
      actions: run.actions,
      in_flight: run.inFlight,
      ...(run.endedWhileStopping ? { ended_while_stopping: true as const } : {}),
    },
    run.requestId,
    ctx.callbackSignal,
    run.span,
  );
  if (result === 'failed') log().warn({ reason: run.reason }, 'segment-end callback lost');
}
