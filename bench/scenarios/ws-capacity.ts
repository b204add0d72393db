/**
 * ws_capacity: N WebSocket sessions held open at once in one gateway process (each
 * started, past its first action, idle), against one process holding N raw `ws` sockets,
 * each bridged to a raw grpc-js stream (raw-ws-holder.ts). The method is capacity's
 * (capacity.ts says why each step is there), with sessions for runs:
 * - Memory is the RSS delta over the N sessions (read from /proc, 2 s after a full GC),
 *   above a warm-up of W sessions that stays held (so connections, JIT and pools are
 *   already paid for). That start is sampled after a compacting GC, so both sides start
 *   with the young generation at its minimum.
 * - Each side is then sampled twice: right after its ramp, after a plain full GC (the peak
 *   a memory limit must cover), and after the same quiet hold of HOLD_WINDOW_MS, after the
 *   compacting GC of a low-memory notification (what a process holding its sessions
 *   settles to: V8's memory reducer does that compaction by itself, but at a time no fixed
 *   hold catches every run).
 * - Each figure is also given without the young generation (V8's new space), which V8
 *   sizes by allocation rate, not by what is held.
 * - Event-loop lag is the gateway's own p99 while it ramps and while it holds the sessions
 *   through one ping round (LONGRUN_WS_PING_MS, 20 s by default: every session is pinged
 *   and its client answers) and one lease-renewal round of the sessions' locks (TTL/3 =
 *   20 s).
 * - CPU per process (/proc) while each side ramps, per session, and while it holds, per
 *   second.
 *
 * The sessions are the web chat's: `?client_type=browser`, the page's own Origin, and the
 * owner's preauth with LockConcurrentFlow (a lock in Redis per session, renewed while it
 * is held). The driver (this process) opens every client socket on both sides; only the
 * gateway's and the raw holder's memory are measured.
 */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type WebSocket from 'ws';
import { WEBSOCKET_PATH } from '../../src/websocket/route';
import { OWNER_OAUTH_TOKEN, WEBSOCKET_PREAUTH } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import { metricSample } from '../../stack/metric-text';
import { IpcChild } from '../../stack/ipc';
import { closedLoop, openWsSession } from '../clients/load';
import { compareMemory, perRun, sampler, type PerRun } from '../measure/memory-per-run';
import { DEPLOYED_ALLOCATOR_ENV, DEPLOYED_NODE_ARGS } from '../../stack/deployed-runtime';
import { CpuMeter } from '../../stack/process-stats';
import { commandDelta } from '../measure/bench-redis';
import type { RawWsHolderQueries } from '../baselines/raw-ws-holder';
import { formatBytes, formatMs, loopLagP99Ms, type Scenario, type ScenarioContext, type ScenarioOutcome } from '../scenario';
import { startBenchStack, type BenchStack } from '../bench-stack';
import { round } from '../measure/stats';

const WARM_SESSIONS = 200;
const RAMP_CONCURRENCY = 100;
/** One ping round (LONGRUN_WS_PING_MS, 20 s) and one lease-renewal round (TTL/3 = 20 s); a little longer. */
const HOLD_WINDOW_MS = 22_000;
/** The gateway's channel pool's default, for the raw holder's streams. */
const STREAMS_PER_CONNECTION = 100;
const idle: Step[] = [{ op: 'checkpoint', text: 'first' }, { op: 'hang' }];

interface Ramp {
  opened: number;
  failures: Record<string, number>;
  ms: number;
}

/** Opens `count` sessions to `baseUrl`, RAMP_CONCURRENCY at a time; every one opened is kept in `held`. */
async function rampSessions(baseUrl: string, prefix: string, count: number, held: WebSocket[]): Promise<Ramp> {
  let opened = 0;
  const failures: Record<string, number> = {};
  const ms = await closedLoop(count, RAMP_CONCURRENCY, async (i) => {
    const result = await openWsSession(baseUrl, WEBSOCKET_PATH, `${prefix}${i}`, idle);
    if (result.ok) {
      held.push(result.ws);
      opened += 1;
    } else {
      failures[result.reason] = (failures[result.reason] ?? 0) + 1;
    }
  });
  return { opened, failures, ms };
}

/** Client sockets still open (the driver's side of each held session). */
function stillOpen(held: WebSocket[]): number {
  return held.filter((ws) => ws.readyState === ws.OPEN).length;
}

function closeAll(held: WebSocket[]): void {
  for (const ws of held) ws.terminate();
  held.length = 0;
}

interface RawFigures {
  ramp: PerRun;
  settled: PerRun;
  held: number;
  ms: number;
  cpuRamp: Record<string, number>;
  cpuHold: Record<string, number>;
}

async function measureRaw(ctx: ScenarioContext, stack: BenchStack, sessions: number): Promise<RawFigures> {
  const holder = await IpcChild.start<RawWsHolderQueries>('raw-ws holder', path.join(__dirname, '..', 'baselines', 'raw-ws-holder.js'), {
    execArgv: ['--expose-gc', ...DEPLOYED_NODE_ARGS],
    env: {
      ...DEPLOYED_ALLOCATOR_ENV,
      BENCH_WORKFLOW_URI: stack.workflow.address,
      BENCH_OAUTH_TOKEN: OWNER_OAUTH_TOKEN,
      BENCH_STREAMS_PER_CONNECTION: String(STREAMS_PER_CONNECTION),
    },
  });
  const held: WebSocket[] = [];
  try {
    const sample = sampler(
      (compact) => holder.query('gc', { compact }),
      () => holder.rss(),
    );
    const meter = (): CpuMeter => new CpuMeter({ raw_ws_holder: holder.pid, workflow_sim: stack.workflow.pid, driver: process.pid }).start();
    const warm = await rampSessions(holder.address, 'wscap-raw-warm-', WARM_SESSIONS, held);
    if (warm.opened !== WARM_SESSIONS) throw new Error(`raw warm-up: ${JSON.stringify(warm.failures)} of ${WARM_SESSIONS} not opened`);
    const before = await sample(true);
    let cpu = meter();
    const ramp = await rampSessions(holder.address, 'wscap-raw-', sessions, held);
    const cpuRamp = cpu.read(ramp.opened);
    await sleep(500);
    const ramped = await sample();
    cpu = meter();
    await sleep(HOLD_WINDOW_MS);
    const cpuHold = cpu.read(HOLD_WINDOW_MS / 1_000);
    const settled = await sample(true);
    const counts = await holder.query('counts', {});
    ctx.log(
      `raw: ${ramp.opened} sessions held in ${Math.round(ramp.ms)} ms (failures ${JSON.stringify(ramp.failures)}) over ${counts.connections} connections; ` +
        `after the hold ${stillOpen(held) - WARM_SESSIONS} client sockets open, ${counts.sockets - WARM_SESSIONS} at the holder (${counts.failed} streams failed); ` +
        `CPU ms per session while ramping ${JSON.stringify(cpuRamp)}, per second held ${JSON.stringify(cpuHold)}`,
    );
    return { ramp: perRun(before, ramped, ramp.opened), settled: perRun(before, settled, ramp.opened), held: ramp.opened, ms: ramp.ms, cpuRamp, cpuHold };
  } finally {
    closeAll(held);
    await holder.query('release', {}).catch(() => undefined);
    await holder.stop();
  }
}

export const wsCapacity: Scenario = {
  name: 'ws_capacity',
  sizes: 'WebSocket sessions held open at once',
  defaultRuns: 5_000,
  // Over a minute at any size (two 22 s holds, six samples 2 s after their GC, five
  // processes started): 94 s at 5 000 sessions, 77 s at 1 000, on top of the default
  // run's four minutes. A size small enough to shave those 17 s leaves per-session
  // figures dominated by what does not grow with the sessions.
  onlyWhenNamed: true,
  async run(ctx): Promise<ScenarioOutcome> {
    const sessions = ctx.options.runs ?? this.defaultRuns;
    const stack = await startBenchStack(ctx.env, {
      gatewayEnv: { LONGRUN_MAX_WS_SESSIONS: String(sessions + WARM_SESSIONS + 100) },
      connections: RAMP_CONCURRENCY,
    });
    const held: WebSocket[] = [];
    try {
      // The web chat's preauth: the lock on (the simulator's default, said here).
      await stack.owner.query('configure', { workflowId: WEBSOCKET_PREAUTH, config: { lockConcurrentFlow: true } });
      // Baseline first, then released: the workflow simulator never holds both sets.
      const raw = await measureRaw(ctx, stack, sessions);
      await stack.workflow.query('reset', {});

      const sample = sampler(
        (compact) => stack.gateway.gc(compact),
        () => stack.gateway.rss(),
      );
      const warm = await rampSessions(stack.gateway.url, 'wscap-warm-', WARM_SESSIONS, held);
      if (warm.opened !== WARM_SESSIONS) throw new Error(`warm-up: ${JSON.stringify(warm.failures)} of ${WARM_SESSIONS} not opened: ${stack.gateway.logs()}`);
      const before = await sample(true);
      await stack.gateway.metrics(); // resets the loop-delay histogram: the next read covers the ramp
      const commandsBefore = await ctx.env.redis.commands();
      let cpu = stack.cpu();
      const ramp = await rampSessions(stack.gateway.url, 'wscap-', sessions, held);
      const cpuRamp = cpu.read(ramp.opened);
      const rampCommands = commandDelta(commandsBefore, await ctx.env.redis.commands());
      const rampLag = loopLagP99Ms(await stack.gateway.metrics());
      ctx.log(
        `longrun: ${ramp.opened} sessions opened in ${Math.round(ramp.ms)} ms (failures ${JSON.stringify(ramp.failures)}), loop lag p99 ${rampLag.toFixed(1)} ms while ramping; ` +
          `CPU ms per session ${JSON.stringify(cpuRamp)}; redis ${JSON.stringify(rampCommands.byName)}`,
      );
      await sleep(500);
      const ramped = await sample();
      const open = await stack.workflow.query('callCounts', { prefix: 'wscap-' });
      await stack.gateway.metrics();
      cpu = stack.cpu();
      await sleep(HOLD_WINDOW_MS);
      const cpuHold = cpu.read(HOLD_WINDOW_MS / 1_000);
      const holdMetrics = await stack.gateway.metrics();
      const holdLag = loopLagP99Ms(holdMetrics);
      const settled = await sample(true);
      const stillHeld = (await stack.workflow.query('callCounts', { prefix: 'wscap-' })).open;
      const clientsOpen = stillOpen(held) - WARM_SESSIONS;
      const gatewaySessions = (metricSample(holdMetrics, 'longrun_websocket_sessions_open') ?? Number.NaN) - WARM_SESSIONS;
      ctx.log(
        `longrun: after a ${HOLD_WINDOW_MS / 1_000} s hold ${stillHeld} streams still open at the service (with the warm-up's), ${clientsOpen} client sockets open, ${gatewaySessions} sessions at the gateway; ` +
          `loop lag p99 ${holdLag.toFixed(1)} ms; CPU ms per second held ${JSON.stringify(cpuHold)}`,
      );

      const atRest = perRun(before, settled, ramp.opened);
      // Parked (docs/spec.md §12): every measured session's socket dropped without a close
      // frame, so each run waits for its client with its stream, lease and (empty) backlog.
      const parkedBefore = metricSample(holdMetrics, 'longrun_websocket_parked_total') ?? 0;
      closeAll(held.splice(WARM_SESSIONS));
      const parkDeadline = Date.now() + 30_000;
      let parkedNow = 0;
      while (Date.now() < parkDeadline) {
        parkedNow = (metricSample(await stack.gateway.metrics(), 'longrun_websocket_parked_total') ?? 0) - parkedBefore;
        if (parkedNow >= ramp.opened) break;
        await sleep(250);
      }
      const parkedSample = await sample(true);
      const atParked = perRun(before, parkedSample, ramp.opened);
      ctx.log(
        `longrun: ${parkedNow} sessions parked (sockets dropped): ${formatBytes(atParked.rss)} RSS, ${formatBytes(atParked.heapUsed)} heap per parked session (held: ${formatBytes(atRest.rss)})`,
      );

      const atRamp = perRun(before, ramped, ramp.opened);
      const { settled: r, ramp: rampRatio, settledOutsideYoung: outsideYoung, rampOutsideYoung } = compareMemory((line) => ctx.log(line), 'session', atRest, atRamp, raw);
      return {
        figures: {
          sessions: ramp.opened,
          // Both sides after the same quiet hold, and a compacting GC.
          bytes_per_session: atRest.rss,
          raw_bytes_per_session: raw.settled.rss,
          ratio: r,
          loop_lag_p99_ms: round(holdLag, 1),
          loop_lag_p99_ramp_ms: round(rampLag, 1),
          bytes_per_session_outside_young: atRest.rssOutsideYoung,
          raw_bytes_per_session_outside_young: raw.settled.rssOutsideYoung,
          ratio_outside_young: outsideYoung,
          young_generation_bytes_per_session: atRest.youngGeneration,
          raw_young_generation_bytes_per_session: raw.settled.youngGeneration,
          heap_bytes_per_session: atRest.heapUsed,
          raw_heap_bytes_per_session: raw.settled.heapUsed,
          heap_total_bytes_per_session: atRest.heapTotal,
          raw_heap_total_bytes_per_session: raw.settled.heapTotal,
          external_bytes_per_session: atRest.external,
          raw_external_bytes_per_session: raw.settled.external,
          heap_spaces_per_session: atRest.spaces,
          raw_heap_spaces_per_session: raw.settled.spaces,
          // Both sides right after their ramp (a GC forced 500 ms after the last session).
          ramp_bytes_per_session: atRamp.rss,
          raw_ramp_bytes_per_session: raw.ramp.rss,
          ramp_ratio: rampRatio,
          ramp_bytes_per_session_outside_young: atRamp.rssOutsideYoung,
          raw_ramp_bytes_per_session_outside_young: raw.ramp.rssOutsideYoung,
          ramp_ratio_outside_young: rampOutsideYoung,
          ramp_young_generation_bytes_per_session: atRamp.youngGeneration,
          raw_ramp_young_generation_bytes_per_session: raw.ramp.youngGeneration,
          ramp_heap_bytes_per_session: atRamp.heapUsed,
          raw_ramp_heap_bytes_per_session: raw.ramp.heapUsed,
          ramp_heap_total_bytes_per_session: atRamp.heapTotal,
          raw_ramp_heap_total_bytes_per_session: raw.ramp.heapTotal,
          ramp_heap_spaces_per_session: atRamp.spaces,
          // CPU ms per process: per session while ramping, per second while holding.
          cpu_ms_per_session_ramp: cpuRamp,
          raw_cpu_ms_per_session_ramp: raw.cpuRamp,
          cpu_ms_per_s_hold: cpuHold,
          raw_cpu_ms_per_s_hold: raw.cpuHold,
          ramp_ms: Math.round(ramp.ms),
          raw_ramp_ms: Math.round(raw.ms),
          redis_commands_per_session: round(rampCommands.total / sessions, 2),
          rejected: ramp.failures,
          streams_open_at_sim: open.open,
          streams_open_after_hold: stillHeld,
          client_sockets_open_after_hold: clientsOpen,
          // The same sessions once their sockets were dropped and their runs parked (an empty backlog each).
          parked: parkedNow,
          parked_bytes_per_session: atParked.rss,
          parked_heap_bytes_per_session: atParked.heapUsed,
          gateway_sessions_open_after_hold: gatewaySessions,
        },
        row: {
          longrun: `${ramp.opened} sessions, ${formatBytes(atRest.rss)}/session, ${formatBytes(atRest.rssOutsideYoung)} outside the young generation (${formatBytes(atRamp.rss)} after the ramp), lag p99 ${formatMs(holdLag)} (ramp ${formatMs(rampLag)})`,
          baseline: `${formatBytes(raw.settled.rss)}/socket+stream, ${formatBytes(raw.settled.rssOutsideYoung)} (${formatBytes(raw.ramp.rss)})`,
          ratio: r === null ? 'n/a' : `${r}x, ${outsideYoung ?? 'n/a'}x (${rampRatio ?? 'n/a'}x)`,
          target: `${sessions} sessions, <= 1.3x settled, lag p99 < 50 ms`,
          // As capacity: the target is the lag of a process holding its sessions; the ramp's is beside it.
          met: ramp.opened >= sessions && clientsOpen >= sessions && r !== null && r <= 1.3 && holdLag < 50,
        },
      };
    } finally {
      closeAll(held);
      await stack.close();
    }
  },
};
