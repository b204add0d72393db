/**
 * scale: what runs held cost the one Redis a fleet shares. Three gateway processes on one
 * redis-server hold N detached runs each (checkpoint, then the service waits) through two
 * full lease renewal periods (2 × TTL/3 at the default 60 s lease, plus two seconds), and
 * the Redis side of that window is read from Redis itself:
 *
 * - commands per second per 10 000 runs held, from INFO commandstats deltas: as the
 *   clients sent them (`redis_commands_per_s_per_10k_runs`: every EVALSHA, MGET … counted
 *   once) and with the commands those scripts ran inside Redis counted too
 *   (`redis_commands_incl_script_calls_per_s_per_10k_runs`). The commands a script runs
 *   are told apart by name: every command some Lua script of the measured build calls
 *   (GET, PEXPIRE, HGET, …); while runs are only held no gateway sends those itself.
 * - Redis CPU per second per 10 000 runs held (INFO cpu, user + system), less what the
 *   same Redis used per second with the gateways connected and no runs (its own cron);
 * - lease renewals that missed their deadline: late (longrun_lease_renewals_late_total),
 *   failed (renew error) or lost, summed over the gateways' /metrics;
 * - gateway RSS per run (and heap used per run beside it): the delta over the N runs after
 *   a full GC, above a warm-up of 100 runs per gateway that stays held.
 *
 * BENCH_GATEWAY_MAIN=<other build>/dist/src/main.js measures another build (a baseline)
 * with this scenario. Run with `--scenario scale` (not part of the default run).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Step } from '../../sandbox/scenario';
import type { GatewayChild } from '../../stack/gateway-child';
import { metricTotal } from '../../stack/metric-text';
import { waitUntil } from '../../stack/wait';
import { ExecuteClient, closedLoop } from '../clients/load';
import { commandDelta } from '../measure/bench-redis';
import { scriptCommands } from '../measure/script-commands';
import { formatBytes, type Scenario, type ScenarioOutcome } from '../scenario';
import { gatewayMainJs, startBenchStack } from '../bench-stack';
import { round } from '../measure/stats';

const PROCESSES = 3;
const WARM_RUNS = 100;
/** Executes in flight per gateway while ramping. */
const RAMP_CONCURRENCY = 40;
const IDLE_WINDOW_MS = 5_000;
const TARGET_COMMANDS_PER_S_PER_10K = 10;
/** The lease the gateways run with (the default, unless the bench's environment sets one). */
const LEASE_TTL_MS = Number(process.env['LONGRUN_LEASE_TTL_MS'] || 60_000);
/**
 * Two full renewal periods (2 × TTL/3) and two seconds: every lease is renewed at least
 * twice, so whether the window catches a lease's renewal once or twice more (its phase)
 * moves the rate by a few percent, not by half.
 */
const HOLD_WINDOW_MS = Math.floor((2 * LEASE_TTL_MS) / 3) + 2_000;
/** Half a core: what one Redis primary is sized to, leaving headroom for everything else. */
const HALF_CORE_MS_PER_S = 500;
/** LONGRUN_MAX_DETACHED_RUNS' default: the runs one gateway process holds. */
const RUNS_PER_GATEWAY = 10_000;

const held: Step[] = [{ op: 'checkpoint', text: 'holding' }, { op: 'hang' }];

interface RenewalCounts {
  ok: number;
  error: number;
  lost: number;
  /** undefined: the build has no such metric (one renewal timer per run had no notion of late). */
  late: number | undefined;
}

async function renewalCounts(gateways: readonly GatewayChild[]): Promise<RenewalCounts> {
  const texts = await Promise.all(gateways.map((g) => g.metrics()));
  const sum = (labels: Record<string, string>): number => texts.reduce((n, t) => n + (metricTotal(t, 'longrun_lock_operations_total', { op: 'renew', ...labels }) ?? 0), 0);
  const lates = texts.map((t) => metricTotal(t, 'longrun_lease_renewals_late_total'));
  return {
    ok: sum({ result: 'ok' }),
    error: sum({ result: 'error' }),
    lost: sum({ result: 'lost' }),
    late: lates.some((l) => l === undefined) ? undefined : lates.reduce((n: number, l) => n + (l ?? 0), 0),
  };
}

async function ramp(client: ExecuteClient, prefix: string, count: number): Promise<{ accepted: number; failures: Record<string, number> }> {
  let accepted = 0;
  const failures: Record<string, number> = {};
  await closedLoop(count, RAMP_CONCURRENCY, async (i) => {
    const result = await client.execute(`${prefix}${i}`, held);
    if (result.status === 202) accepted += 1;
    else failures[String(result.status)] = (failures[String(result.status)] ?? 0) + 1;
  });
  return { accepted, failures };
}

export const scale: Scenario = {
  name: 'scale',
  sizes: `runs held per gateway process (${PROCESSES} processes)`,
  defaultRuns: 3_000,
  onlyWhenNamed: true,
  async run(ctx): Promise<ScenarioOutcome> {
    const runs = ctx.options.runs ?? this.defaultRuns;
    const { redis } = ctx.env;
    const stack = await startBenchStack(ctx.env, {
      replicas: Array.from({ length: PROCESSES }, (_, i) => `scale-${i}`),
      gatewayEnv: { LONGRUN_MAX_DETACHED_RUNS: String(runs + WARM_RUNS + 100) },
    });
    const gateways = stack.replicas;
    const clients: ExecuteClient[] = [];
    try {
      for (const gateway of gateways) clients.push(new ExecuteClient(gateway.url, RAMP_CONCURRENCY));
      ctx.log(`${PROCESSES} gateways (${gatewayMainJs}), lease ${LEASE_TTL_MS} ms, hold window ${HOLD_WINDOW_MS} ms`);

      // What Redis costs with the gateways connected and nothing held (its own cron, the stop poll's timer idle).
      const idleCpuBefore = await redis.cpuMs();
      await sleep(IDLE_WINDOW_MS);
      const idleCpuMsPerS = ((await redis.cpuMs()) - idleCpuBefore) / (IDLE_WINDOW_MS / 1_000);

      const warm = await Promise.all(clients.map((c, g) => ramp(c, `scale-warm-${g}-`, WARM_RUNS)));
      if (warm.some((w) => w.accepted !== WARM_RUNS)) throw new Error(`warm-up not accepted: ${JSON.stringify(warm)}`);
      const before = await Promise.all(gateways.map(async (g) => ({ heap: await g.gc(), rss: g.rss() })));
      const started = performance.now();
      const ramps = await Promise.all(clients.map((c, g) => ramp(c, `scale-run-${g}-`, runs)));
      const accepted = ramps.reduce((n, r) => n + r.accepted, 0);
      ctx.log(`${accepted} runs accepted in ${Math.round(performance.now() - started)} ms (failures ${JSON.stringify(ramps.map((r) => r.failures))})`);
      await waitUntil(async () => (await stack.workflow.query('callCounts', { prefix: 'scale-run-' })).withAction >= accepted, 60_000, 'every run to get its first action');
      await sleep(500);
      const after = await Promise.all(gateways.map(async (g) => ({ heap: await g.gc(), rss: g.rss() })));
      const perRun = (read: (m: (typeof after)[number]) => number): number => after.reduce((n, m, i) => n + read(m) - read(before[i] as typeof m), 0) / accepted;
      const bytesPerRun = perRun((m) => m.rss);
      const heapBytesPerRun = perRun((m) => m.heap.heapUsed);
      const heldRuns = accepted + WARM_RUNS * PROCESSES;

      const renewalsBefore = await renewalCounts(gateways);
      const commandsBefore = await redis.commands();
      const cpuBefore = await redis.cpuMs();
      const windowStarted = performance.now();
      await sleep(HOLD_WINDOW_MS);
      const cpuMs = (await redis.cpuMs()) - cpuBefore;
      const windowS = (performance.now() - windowStarted) / 1_000;
      const commands = commandDelta(commandsBefore, await redis.commands());
      const renewalsAfter = await renewalCounts(gateways);
      const open = (await stack.workflow.query('callCounts', { prefix: 'scale-' })).open;

      const inScripts = scriptCommands(gatewayMainJs, ['coordination']);
      const scriptCalls = Object.entries(commands.byName).reduce((n, [name, calls]) => n + (inScripts.has(name) ? calls : 0), 0);
      const clientCommands = commands.total - scriptCalls;
      const per10k = (value: number): number => value / windowS / (heldRuns / 10_000);
      const commandsPer10k = per10k(clientCommands);
      const cpuPer10k = per10k(cpuMs - idleCpuMsPerS * windowS);
      const late = renewalsAfter.late === undefined || renewalsBefore.late === undefined ? undefined : renewalsAfter.late - renewalsBefore.late;
      const missed = (late ?? 0) + (renewalsAfter.error - renewalsBefore.error) + (renewalsAfter.lost - renewalsBefore.lost);
      const runsPerPrimary = cpuPer10k > 0 ? (HALF_CORE_MS_PER_S / cpuPer10k) * 10_000 : Number.NaN;
      ctx.log(
        `${heldRuns} runs held ${windowS.toFixed(1)} s: ${clientCommands} commands sent (${scriptCalls} more run by scripts) ${JSON.stringify(commands.byName)}; ` +
          `redis CPU ${Math.round(cpuMs)} ms (idle ${idleCpuMsPerS.toFixed(1)} ms/s); renewals ok ${renewalsAfter.ok - renewalsBefore.ok}, missed ${missed}; ${open} calls open`,
      );
      return {
        figures: {
          processes: PROCESSES,
          runs: heldRuns,
          redis_commands_per_s_per_10k_runs: round(commandsPer10k, 2),
          redis_cpu_ms_per_s_per_10k_runs: round(cpuPer10k, 2),
          missed_renewals: missed,
          bytes_per_run: Math.round(bytesPerRun),
          heap_bytes_per_run: Math.round(heapBytesPerRun),
          redis_commands_incl_script_calls_per_s_per_10k_runs: round(per10k(commands.total), 1),
          redis_commands_by_name: commands.byName,
          redis_idle_cpu_ms_per_s: round(idleCpuMsPerS, 2),
          renewals_per_s: round((renewalsAfter.ok - renewalsBefore.ok) / windowS, 1),
          late_renewals: late ?? null,
          failed_renewals: renewalsAfter.error - renewalsBefore.error,
          lost_leases: renewalsAfter.lost - renewalsBefore.lost,
          runs_per_gateway: runs,
          lease_ttl_ms: LEASE_TTL_MS,
          window_s: round(windowS, 1),
          calls_open_after: open,
          runs_per_primary_at_half_core: Number.isFinite(runsPerPrimary) ? Math.round(runsPerPrimary) : null,
          gateways_per_primary_at_half_core: Number.isFinite(runsPerPrimary) ? round(runsPerPrimary / RUNS_PER_GATEWAY, 1) : null,
          gateway: gatewayMainJs,
        },
        row: {
          longrun: `${PROCESSES}×${runs} runs: ${commandsPer10k.toFixed(1)} commands/s and ${cpuPer10k.toFixed(2)} ms Redis CPU/s per 10k runs; ${missed} missed; ${formatBytes(bytesPerRun)}/run`,
          baseline: '-',
          ratio: '-',
          target: `<= ${TARGET_COMMANDS_PER_S_PER_10K} commands/s per 10k runs, 0 missed`,
          met: accepted === runs * PROCESSES && open === heldRuns && commandsPer10k <= TARGET_COMMANDS_PER_S_PER_10K && missed === 0,
        },
      };
    } finally {
      await Promise.allSettled(clients.map((c) => c.close()));
      await stack.close();
    }
  },
};
