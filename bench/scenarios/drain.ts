/**
 * drain: SIGTERM to a gateway holding N detached runs → every run stopped with
 * WORKHORSE_SERVER_SHUTDOWN and acknowledged, every lock released, the process exited.
 * drain_ms runs from the signal to the process's exit; locks_left is counted in Redis
 * with SCAN afterwards. No baseline: the figure is held to its target alone.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Step } from '../../sandbox/scenario';
import { closedLoop } from '../clients/load';
import { waitUntil } from '../../stack/wait';
import { commandDelta } from '../measure/bench-redis';
import { formatMs, type Scenario, type ScenarioOutcome } from '../scenario';
import { startBenchStack } from '../bench-stack';
import { round } from '../measure/stats';

const held: Step[] = [{ op: 'checkpoint', text: 'holding' }, { op: 'hang' }];
const RAMP_CONCURRENCY = 100;
const TARGET_MS = 2_000;

export const drain: Scenario = {
  name: 'drain',
  sizes: 'runs in flight at SIGTERM',
  defaultRuns: 5_000,
  async run(ctx): Promise<ScenarioOutcome> {
    const runs = ctx.options.runs ?? this.defaultRuns;
    const stack = await startBenchStack(ctx.env, {
      gatewayEnv: { LONGRUN_MAX_DETACHED_RUNS: String(runs + 100) },
      connections: RAMP_CONCURRENCY,
    });
    try {
      let accepted = 0;
      const rampMs = await closedLoop(runs, RAMP_CONCURRENCY, async (i) => {
        if ((await stack.load.execute(`drain-${i}`, held)).status === 202) accepted += 1;
      });
      ctx.log(`${accepted} runs accepted in ${Math.round(rampMs)} ms`);
      await waitUntil(async () => (await stack.workflow.query('callCounts', { prefix: 'drain-' })).withAction >= accepted, 30_000, 'every run to get its first action');
      const locksBefore = await ctx.env.redis.count('workhorse:duoworkflow:lock:*');
      await stack.load.close();
      await sleep(500);

      const commandsBefore = await ctx.env.redis.commands();
      const cpu = stack.cpu();
      const signalled = performance.now();
      const signalledAt = Date.now();
      stack.gateway.terminate();
      const exitCode = await stack.gateway.exited(30_000);
      const drainMs = performance.now() - signalled;
      // Read before anything else runs; the gateway is gone, its CPU was read at its exit.
      const cpuMs = cpu.read();
      const locksLeft = await ctx.env.redis.count('workhorse:duoworkflow:lock:*');
      // What the drain sent Redis (lock releases, mostly), as commandstats counts it: the
      // commands a script runs inside Redis are counted too, under their own names.
      const redisCommands = commandDelta(commandsBefore, await ctx.env.redis.commands()).byName;
      delete redisCommands['scan'];
      const counts = await stack.workflow.query('callCounts', { prefix: 'drain-' });
      const callbacks = await stack.owner.query('segmentEnds', { prefix: 'drain-' });
      const stopped = counts.stopReasons['WORKHORSE_SERVER_SHUTDOWN'] ?? 0;
      // When the workflow service had every stop, and had ended every call: the rest of
      // drain_ms is lock release, segment-end callbacks and exit.
      const calls = await stack.workflow.query('calls', { prefix: 'drain-' });
      const lastStopMs = Math.max(...calls.map((c) => (c.stopReceivedAt[0] ?? Number.NaN) - signalledAt));
      const firstStopMs = Math.min(...calls.map((c) => (c.stopReceivedAt[0] ?? Number.NaN) - signalledAt));
      const lastEndMs = Math.max(...calls.map((c) => (c.endedAt ?? Number.NaN) - signalledAt));
      const callbackTimes = await stack.owner.query('segmentEndTimes', { prefix: 'drain-' });
      const firstCallbackMs = callbackTimes ? callbackTimes.first - signalledAt : null;
      const lastCallbackMs = callbackTimes ? callbackTimes.last - signalledAt : null;
      ctx.log(
        `exit ${exitCode} after ${Math.round(drainMs)} ms; ${stopped} shutdown stops received, ${locksLeft} of ${locksBefore} locks left, callbacks ${JSON.stringify(callbacks)}; ` +
          `stops received from ${firstStopMs} to ${lastStopMs} ms, last call ended at ${lastEndMs} ms, callbacks from ${firstCallbackMs} to ${lastCallbackMs} ms; CPU ms ${JSON.stringify(cpuMs)}; redis ${JSON.stringify(redisCommands)}`,
      );
      return {
        figures: {
          runs: accepted,
          drain_ms: round(drainMs, 0),
          locks_left: locksLeft,
          exit_code: exitCode,
          locks_before: locksBefore,
          stops_received: stopped,
          calls_still_open: counts.calls - counts.ended,
          segment_end_callbacks: callbacks,
          ramp_ms: round(rampMs, 0),
          cpu_ms_during_drain: cpuMs,
          redis_commands_during_drain: redisCommands,
          first_stop_received_ms: round(firstStopMs, 0),
          last_stop_received_ms: round(lastStopMs, 0),
          last_call_ended_ms: round(lastEndMs, 0),
          first_callback_ms: firstCallbackMs,
          last_callback_ms: lastCallbackMs,
        },
        row: {
          longrun: `${accepted} runs drained in ${formatMs(drainMs)}, exit ${exitCode}, ${locksLeft} locks left, ${stopped} stops acked`,
          baseline: '-',
          ratio: '-',
          target: `${runs} runs < ${TARGET_MS / 1_000} s, 0 locks, exit 0`,
          met: accepted >= runs && drainMs < TARGET_MS && locksLeft === 0 && exitCode === 0 && stopped === accepted,
        },
      };
    } finally {
      await stack.close();
    }
  },
};
