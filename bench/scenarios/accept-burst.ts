/**
 * accept --burst (issue [18]): the CPU an accepted execute costs when executes come in
 * bursts. BURST_SIZE detached executes are issued in one tick, each the run of the
 * fixed-rate phase (first action after 20 ms, a second's life, an end); the next burst
 * goes once every run of the last has ended, its lock released and its segment-end
 * callback at the owner, so the bursts' CPU is theirs from execute to callback and no
 * burst queues behind another's ends. After a warm-up burst (not measured), --runs
 * executes in all. Then a bare grpc-js client's starts (open, start, first action) in the
 * same bursts, each burst's calls ended before the next. Latency is the fixed-rate
 * phase's overhead (time to the 202 minus the first-action delay), within bursts: its
 * p99 is a burst's queue.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { OWNER_OAUTH_TOKEN } from '../../sandbox/owner-sim';
import { scenarioMetadata } from '../../sandbox/scenario';
import { waitUntil, withTimeout } from '../../stack/wait';
import { RawClientPool } from '../baselines/raw-grpc';
import { formatMs, type ScenarioContext, type ScenarioOutcome } from '../scenario';
import { startBenchStack, type BenchStack } from '../bench-stack';
import { percentile, ratio, round } from '../measure/stats';
import { FIRST_ACTION_MS, RUN_LIFE_MS, errorCount, steps, type Tally } from './accept-run';

/** Executes issued at once. */
export const BURST_SIZE = 200;
/** --runs in burst mode when not given: ten bursts. */
export const BURST_DEFAULT_RUNS = 2_000;
/** How long a burst's runs may take to end past their second of life: longer is a lost end, and fails the scenario. */
const END_TIMEOUT_MS = 30_000;
/** Issue [18]'s target: the gateway's CPU per accepted execute in bursts. */
const GATEWAY_CPU_TARGET_MS = 0.4;

/** `runs` in bursts of BURST_SIZE, the last holding what is left. */
function burstSizes(runs: number): number[] {
  return Array.from({ length: Math.ceil(runs / BURST_SIZE) }, (_, b) => Math.min(BURST_SIZE, runs - b * BURST_SIZE));
}

export function emptyTally(): Tally {
  return { overheads: [], errors: {} };
}

/** `size` detached executes of the accept run at once, as `prefix<i>`; resolves once every accepted run's callback is in. */
export async function gatewayBurst(stack: BenchStack, prefix: string, size: number, tally: Tally): Promise<void> {
  const results = await Promise.all(Array.from({ length: size }, (_, i) => stack.load.execute(`${prefix}${i}`, steps)));
  let accepted = 0;
  for (const result of results) {
    if (result.status === 202) {
      accepted += 1;
      tally.overheads.push(result.ms - FIRST_ACTION_MS);
    } else {
      tally.errors[String(result.status)] = (tally.errors[String(result.status)] ?? 0) + 1;
    }
  }
  // A run's callback goes out after its lock is released: the owner holding every
  // accepted run's callback means the burst's runs are done.
  await sleep(RUN_LIFE_MS);
  await waitUntil(
    async () => Object.values(await stack.owner.query('segmentEnds', { prefix })).reduce((a, b) => a + b, 0) >= accepted,
    END_TIMEOUT_MS,
    `the ${accepted} segment-end callbacks of ${prefix}*`,
  );
}

async function directBurst(pool: RawClientPool, prefix: string, size: number, tally: Tally): Promise<void> {
  const metadata = scenarioMetadata(steps);
  const ends: Array<Promise<void>> = [];
  await Promise.all(
    Array.from({ length: size }, async (_, i) => {
      const started = performance.now();
      const call = pool.open(`${prefix}${i}`, metadata, OWNER_OAUTH_TOKEN);
      ends.push(new Promise((resolve) => call.stream.once('status', () => resolve())));
      try {
        await call.firstAction;
        tally.overheads.push(performance.now() - started - FIRST_ACTION_MS);
      } catch {
        tally.errors['ended'] = (tally.errors['ended'] ?? 0) + 1;
      }
    }),
  );
  await withTimeout(Promise.all(ends), RUN_LIFE_MS + END_TIMEOUT_MS, `the calls of ${prefix}* to end`);
}

/** accept with --burst (accept.ts hands over to it): no fixed-rate phase, no ladder. */
export async function acceptInBursts(ctx: ScenarioContext): Promise<ScenarioOutcome> {
  const sizes = burstSizes(ctx.options.runs ?? BURST_DEFAULT_RUNS);
  const stack = await startBenchStack(ctx.env, { connections: 256 });
  // As many streams per connection as the gateway's pool puts on one, and kept from the
  // warm-up on, as the gateway keeps its pool's connections.
  const pool = new RawClientPool(stack.workflow.address, 100);
  try {
    // Warm both paths (JIT, connections) before measuring either.
    await gatewayBurst(stack, 'acc-burst-warm-', BURST_SIZE, emptyTally());
    await directBurst(pool, 'acc-dburst-warm-', BURST_SIZE, emptyTally());

    const longrun = emptyTally();
    let cpu = stack.cpu();
    for (const [b, size] of sizes.entries()) await gatewayBurst(stack, `acc-burst-${b}-`, size, longrun);
    // Per accepted execute, the target's unit: a refused execute costs less, and is not what is asked.
    const cpuLongrun = cpu.read(Math.max(1, longrun.overheads.length));
    const p50 = percentile(longrun.overheads, 50);
    const p99 = percentile(longrun.overheads, 99);
    ctx.log(
      `longrun: ${longrun.overheads.length} accepted in ${sizes.length} bursts of ${BURST_SIZE}, errors ${JSON.stringify(longrun.errors)}; ` +
        `overhead p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms; CPU ms per execute ${JSON.stringify(cpuLongrun)}`,
    );
    const direct = emptyTally();
    cpu = stack.cpu();
    for (const [b, size] of sizes.entries()) await directBurst(pool, `acc-dburst-${b}-`, size, direct);
    const cpuDirect = cpu.read(Math.max(1, direct.overheads.length));
    const directP50 = percentile(direct.overheads, 50);
    const directP99 = percentile(direct.overheads, 99);
    ctx.log(
      `direct: ${direct.overheads.length} first actions in ${sizes.length} bursts of ${BURST_SIZE}, errors ${JSON.stringify(direct.errors)}; ` +
        `overhead p50 ${directP50.toFixed(1)} ms, p99 ${directP99.toFixed(1)} ms; CPU ms per start ${JSON.stringify(cpuDirect)}`,
    );

    const gatewayCpu = cpuLongrun['gateway'] ?? Number.NaN;
    // The bare client's process does the gRPC part of what the gateway does, and nothing else.
    const cpuRatio = ratio(gatewayCpu, cpuDirect['driver'] ?? Number.NaN);
    const p99Ratio = ratio(p99, directP99);
    return {
      figures: {
        mode: 'burst',
        burst_size: BURST_SIZE,
        bursts: sizes.length,
        requests: longrun.overheads.length,
        first_action_ms: FIRST_ACTION_MS,
        overhead_p50_ms: round(p50),
        overhead_p99_ms: round(p99),
        errors: longrun.errors,
        cpu_ms_per_execute: cpuLongrun,
        direct_p50_ms: round(directP50),
        direct_p99_ms: round(directP99),
        direct_errors: direct.errors,
        direct_cpu_ms_per_start: cpuDirect,
        ratio_p99: p99Ratio,
        cpu_ratio_gateway_to_bare_client: cpuRatio,
      },
      row: {
        longrun: `gateway CPU ${formatMs(gatewayCpu)} per accepted execute in bursts of ${BURST_SIZE}; overhead p50 ${formatMs(p50)}, p99 ${formatMs(p99)}`,
        baseline: `bare client CPU ${formatMs(cpuDirect['driver'] ?? null)} per start; p99 ${formatMs(directP99)}`,
        ratio: `${cpuRatio ?? 'n/a'}x CPU, ${p99Ratio ?? 'n/a'}x p99`,
        target: `gateway CPU <= ${GATEWAY_CPU_TARGET_MS} ms per execute in bursts`,
        met: errorCount(longrun) === 0 && gatewayCpu <= GATEWAY_CPU_TARGET_MS,
      },
    };
  } finally {
    pool.close();
    await stack.close();
  }
}
