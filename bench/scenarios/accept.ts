/**
 * accept: how long the dispatcher waits for its 202, minus the simulated first-action
 * delay, at a fixed offered rate (open loop, so queueing shows) — against a bare grpc-js
 * client at the same rate (open, start, await first action). Then the highest offered
 * rate whose overhead p99 stays under 50 ms, on a rising ladder of short steps. With
 * --burst, executes in bursts instead (accept-burst.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { OWNER_OAUTH_TOKEN } from '../../sandbox/owner-sim';
import { scenarioMetadata } from '../../sandbox/scenario';
import { openLoop } from '../clients/load';
import { RawClientPool } from '../baselines/raw-grpc';
import { formatMs, type Scenario, type ScenarioContext, type ScenarioOutcome } from '../scenario';
import { startBenchStack, type BenchStack } from '../bench-stack';
import { percentile, ratio, round } from '../measure/stats';
import { BURST_DEFAULT_RUNS, BURST_SIZE, acceptInBursts } from './accept-burst';
import { FIRST_ACTION_MS, errorCount, steps, type Tally } from './accept-run';
const DEFAULT_RATE = 200;
const P99_LIMIT_MS = 50;
const LADDER_STEP_S = 4;
const LADDER_MAX_RATE = 3_000;
const LADDER_MIN_RATE = 20;
/** Let the previous step's runs end (and their callbacks go out) before the next. */
const SETTLE_MS = 1_500;

interface Phase extends Tally {
  worstLateMs: number;
}

async function gatewayPhase(stack: BenchStack, prefix: string, rate: number, count: number): Promise<Phase> {
  const overheads: number[] = [];
  const errors: Record<string, number> = {};
  const { worstLateMs } = await openLoop(rate, count, async (i) => {
    const result = await stack.load.execute(`${prefix}${i}`, steps);
    if (result.status === 202) overheads.push(result.ms - FIRST_ACTION_MS);
    else errors[String(result.status)] = (errors[String(result.status)] ?? 0) + 1;
  });
  return { overheads, errors, worstLateMs };
}

async function directPhase(address: string, prefix: string, rate: number, count: number): Promise<Phase> {
  // As many streams per connection as the gateway's pool puts on one.
  const pool = new RawClientPool(address, 100);
  const metadata = scenarioMetadata(steps);
  const overheads: number[] = [];
  const errors: Record<string, number> = {};
  try {
    const { worstLateMs } = await openLoop(rate, count, async (i) => {
      const started = performance.now();
      const call = pool.open(`${prefix}${i}`, metadata, OWNER_OAUTH_TOKEN);
      try {
        await call.firstAction;
        overheads.push(performance.now() - started - FIRST_ACTION_MS);
      } catch {
        errors['ended'] = (errors['ended'] ?? 0) + 1;
      }
    });
    return { overheads, errors, worstLateMs };
  } finally {
    // Runs end by themselves a second later; give them that before closing.
    await sleep(1_200);
    pool.close();
  }
}

/** One step of the ladder, as recorded in `max_rate_ladder` (and drawn by bench/report/charts.ts). */
type LadderStep = { rate: number; p50_ms: number | null; p99_ms: number | null; errors: number };

/**
 * The highest offered rate whose overhead p99 stays under 50 ms: from the fixed rate up
 * by half again each step while it holds, or down by halves until it holds.
 */
async function maxRate(ctx: ScenarioContext, stack: BenchStack, from: number): Promise<{ rate: number; steps: LadderStep[] }> {
  const ladder: LadderStep[] = [];
  const holds = async (rate: number): Promise<boolean> => {
    await sleep(SETTLE_MS);
    const phase = await gatewayPhase(stack, `acc-max-${rate}-`, rate, Math.max(50, rate * LADDER_STEP_S));
    const p99 = percentile(phase.overheads, 99);
    const errors = errorCount(phase);
    ladder.push({ rate, p50_ms: round(percentile(phase.overheads, 50)), p99_ms: round(p99), errors });
    ctx.log(`ladder ${rate}/s: overhead p99 ${p99.toFixed(1)} ms, errors ${errors}, scheduler late by ${phase.worstLateMs.toFixed(1)} ms at worst`);
    return p99 < P99_LIMIT_MS && errors <= phase.overheads.length / 100;
  };
  if (!(await holds(from))) {
    for (let rate = Math.floor(from / 2); rate >= LADDER_MIN_RATE; rate = Math.floor(rate / 2)) if (await holds(rate)) return { rate, steps: ladder };
    return { rate: 0, steps: ladder };
  }
  let best = from;
  for (let rate = Math.round(from * 1.5); rate <= LADDER_MAX_RATE; rate = Math.round(rate * 1.5)) {
    if (!(await holds(rate))) break;
    best = rate;
  }
  return { rate: best, steps: ladder };
}

export const accept: Scenario = {
  name: 'accept',
  sizes: `executes at the fixed rate (4000 = 200/s for 20 s; with --burst, in bursts of ${BURST_SIZE}: ${BURST_DEFAULT_RUNS} unless given)`,
  defaultRuns: 4_000,
  async run(ctx): Promise<ScenarioOutcome> {
    if (ctx.options.burst) return acceptInBursts(ctx);
    const rate = ctx.options.rate ?? DEFAULT_RATE;
    const requests = ctx.options.runs ?? (ctx.options.durationS ? Math.round(rate * ctx.options.durationS) : this.defaultRuns);
    const stack = await startBenchStack(ctx.env, { connections: 256 });
    try {
      // Warm both paths (JIT, connections) before measuring either.
      await gatewayPhase(stack, 'acc-warm-', rate, Math.min(200, requests));
      await directPhase(stack.workflow.address, 'acc-dwarm-', rate, Math.min(200, requests));

      let cpu = stack.cpu();
      const longrun = await gatewayPhase(stack, 'acc-', rate, requests);
      await sleep(1_200); // the runs' ends (lock release, callback) belong to the phase too
      const cpuLongrun = cpu.read(requests);
      ctx.log(`longrun: ${longrun.overheads.length} accepted at ${rate}/s, errors ${JSON.stringify(longrun.errors)}; CPU ms per execute ${JSON.stringify(cpuLongrun)}`);
      cpu = stack.cpu();
      const direct = await directPhase(stack.workflow.address, 'acc-direct-', rate, requests);
      const cpuDirect = cpu.read(requests);
      ctx.log(`direct: ${direct.overheads.length} first actions at ${rate}/s, errors ${JSON.stringify(direct.errors)}; CPU ms per start ${JSON.stringify(cpuDirect)}`);
      const ladder = await maxRate(ctx, stack, rate);

      const p50 = percentile(longrun.overheads, 50);
      const p99 = percentile(longrun.overheads, 99);
      const directP99 = percentile(direct.overheads, 99);
      const r = ratio(p99, directP99);
      return {
        figures: {
          requests: longrun.overheads.length,
          overhead_p50_ms: round(p50),
          overhead_p99_ms: round(p99),
          direct_p99_ms: round(directP99),
          ratio_p99: r,
          max_rate_per_s: ladder.rate,
          offered_rate_per_s: rate,
          first_action_ms: FIRST_ACTION_MS,
          direct_p50_ms: round(percentile(direct.overheads, 50)),
          added_p50_ms: round(p50 - percentile(direct.overheads, 50)),
          errors: longrun.errors,
          cpu_ms_per_execute: cpuLongrun,
          direct_cpu_ms_per_start: cpuDirect,
          max_rate_ladder: ladder.steps,
        },
        row: {
          longrun: `overhead p50 ${formatMs(p50)}, p99 ${formatMs(p99)} at ${rate}/s; max ${ladder.rate}/s`,
          baseline: `direct p99 ${formatMs(directP99)}`,
          ratio: r === null ? 'n/a' : `${r}x`,
          target: 'overhead p99 < 5 ms',
          met: errorCount(longrun) === 0 && p99 < 5,
        },
      };
    } finally {
      await stack.close();
    }
  },
};
