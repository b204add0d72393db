/**
 * relay: runHTTPRequest actions per second relayed through longrun to the owner API
 * (workflow service → gateway → owner → gateway → workflow service), against the
 * simulated workflow service making the same HTTP calls to the owner itself. Both sides
 * keep the same number of requests in flight; rounds alternate and the median counts.
 */
import { OWNER_OAUTH_TOKEN } from '../../sandbox/owner-sim';
import type { Step } from '../../sandbox/scenario';
import { waitUntil } from '../../stack/wait';
import type { Scenario, ScenarioOutcome } from '../scenario';
import { startBenchStack, type BenchStack } from '../bench-stack';
import { median, ratio, round } from '../measure/stats';

const PATH = '/api/v4/projects/1';
/** Runs in flight at once, each relaying one request at a time (as a turn does). */
const CONCURRENCY = 32;
const ROUNDS = 5;

/** About `actions` relays through the gateway, over CONCURRENCY detached runs named `prefix<i>`; resolves once every run ended. */
export async function throughLongrun(stack: BenchStack, prefix: string, actions: number): Promise<{ perS: number; ok: number; total: number }> {
  const perRun = Math.ceil(actions / CONCURRENCY);
  const steps: Step[] = [{ op: 'repeat', times: perRun, steps: [{ op: 'http', method: 'GET', path: PATH }] }, { op: 'end' }];
  const answers = await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => stack.load.execute(`${prefix}${i}`, steps)));
  const refused = answers.filter((a) => a.status !== 202);
  if (refused.length > 0)
    throw new Error(
      `relay runs refused: ${refused
        .map((a) => `${a.status} ${a.body}`)
        .join('; ')
        .slice(0, 500)}`,
    );
  await waitUntil(async () => (await stack.workflow.query('callCounts', { prefix })).ended >= CONCURRENCY, 300_000, 'the relay runs to end', 200);
  const calls = await stack.workflow.query('calls', { prefix });
  const first = Math.min(...calls.map((c) => c.startedAt));
  const last = Math.max(...calls.map((c) => c.endedAt ?? Number.NaN));
  const total = calls.reduce((n, c) => n + c.responses, 0);
  const ok = calls.reduce((n, c) => n + c.httpOk, 0);
  return { perS: total / ((last - first) / 1_000), ok, total };
}

export const relay: Scenario = {
  name: 'relay',
  sizes: 'relayed actions per side, over 5 alternating rounds',
  defaultRuns: 30_000,
  async run(ctx): Promise<ScenarioOutcome> {
    const actions = ctx.options.runs ?? this.defaultRuns;
    const perRound = Math.max(CONCURRENCY, Math.round(actions / ROUNDS));
    const stack = await startBenchStack(ctx.env, { connections: CONCURRENCY });
    try {
      const direct = (n: number) =>
        stack.workflow.query('directRelay', { ownerUrl: stack.owner.address, path: PATH, concurrency: CONCURRENCY, actions: n, token: OWNER_OAUTH_TOKEN }, 300_000);
      // Warm-up of both paths (JIT, connection pools): rates still climb for ~5 000 actions.
      await throughLongrun(stack, 'relay-warm-', Math.min(6_000, perRound));
      await direct(Math.min(6_000, perRound));
      const viaLongrun: number[] = [];
      const viaDirect: number[] = [];
      let okLongrun = 0;
      let totalLongrun = 0;
      const cpuLongrun: Array<Record<string, number>> = [];
      const cpuDirect: Array<Record<string, number>> = [];
      for (let round = 0; round < ROUNDS; round++) {
        await stack.owner.query('reset', {});
        await stack.workflow.query('reset', {});
        let cpu = stack.cpu();
        const l = await throughLongrun(stack, `relay-${round}-`, perRound);
        cpuLongrun.push(cpu.read(l.total / 1_000));
        viaLongrun.push(l.perS);
        okLongrun += l.ok;
        totalLongrun += l.total;
        cpu = stack.cpu();
        const d = await direct(perRound);
        cpuDirect.push(cpu.read(d.actions / 1_000));
        viaDirect.push(d.actions / (d.elapsedMs / 1_000));
        ctx.log(
          `round ${round + 1}: longrun ${l.perS.toFixed(0)}/s (${l.ok}/${l.total} ok), direct ${(d.actions / (d.elapsedMs / 1_000)).toFixed(0)}/s (${d.ok}/${d.actions} ok); CPU ms per 1000 actions ${JSON.stringify(cpuLongrun[round])} vs ${JSON.stringify(cpuDirect[round])}`,
        );
      }
      const perS = median(viaLongrun);
      const directPerS = median(viaDirect);
      const r = ratio(perS, directPerS);
      return {
        figures: {
          actions_per_s: round(perS, 0),
          direct_actions_per_s: round(directPerS, 0),
          ratio: r,
          concurrency: CONCURRENCY,
          actions_per_round: perRound,
          rounds_actions_per_s: viaLongrun.map((v) => round(v, 0)),
          rounds_direct_actions_per_s: viaDirect.map((v) => round(v, 0)),
          failed_actions: totalLongrun - okLongrun,
          cpu_ms_per_1000_actions: cpuLongrun[cpuLongrun.length - 1],
          direct_cpu_ms_per_1000_actions: cpuDirect[cpuDirect.length - 1],
        },
        row: {
          longrun: `${perS.toFixed(0)} actions/s`,
          baseline: `${directPerS.toFixed(0)} actions/s direct`,
          ratio: r === null ? 'n/a' : `${r}x`,
          target: '>= 0.8x direct',
          met: r !== null && r >= 0.8 && okLongrun === totalLongrun,
        },
      };
    } finally {
      await stack.close();
    }
  },
};
