/**
 * tracing (docs/spec.md §13): the gateway's CPU per accepted execute and per relayed
 * action with tracing off and on at full sampling (OTEL_TRACES_SAMPLER=always_on, OTLP/HTTP
 * protobuf to a receiver in the driver's process), side by side: one gateway per arm, all
 * up at once on the one Redis and the same two simulator processes (so only the gateways
 * differ), measured in alternating rounds (the order rotating each round) so a noisy
 * machine weighs on every arm alike; the medians count. With
 * BENCH_GATEWAY_BASELINE naming another build's dist/src/main.js (one without tracing,
 * e.g. main before it), that build is a third arm: tracing off against no tracing code at all.
 *
 * Executes: bursts of BURST_SIZE of accept-burst.ts's run (first action after 20 ms, a
 * second's life, the callback), CPU from the burst's first execute to its last callback.
 * Relays: relay.ts's runs (32 at once, each relaying in turn), CPU per 1 000 actions.
 */
import { OtlpReceiver } from '../../sandbox/otlp-receiver';
import type { Scenario, ScenarioOutcome } from '../scenario';
import { startStack, type Stack } from '../../stack';
import { benchStackOptions, startBenchStack, type BenchStack } from '../bench-stack';
import { median, ratio, round } from '../measure/stats';
import { BURST_SIZE, emptyTally, gatewayBurst } from './accept-burst';
import { throughLongrun } from './relay';

// Five: on a shared machine single rounds swing by half; the median of five holds.
const ROUNDS = 5;
/** Relayed actions per round and arm, for each detached execute of the round. */
const RELAYS_PER_EXECUTE = 10;

interface Arm {
  name: 'off' | 'on' | 'baseline';
  stack: BenchStack;
  cpuPerExecute: number[];
  cpuPer1000Actions: number[];
  errors: number;
}

export const tracing: Scenario = {
  name: 'tracing',
  sizes: `detached executes per arm and round (in bursts of ${BURST_SIZE}); ${RELAYS_PER_EXECUTE}x as many relayed actions`,
  defaultRuns: 400,
  onlyWhenNamed: true,
  async run(ctx): Promise<ScenarioOutcome> {
    const executes = Math.max(BURST_SIZE, Math.round((ctx.options.runs ?? this.defaultRuns) / BURST_SIZE) * BURST_SIZE);
    const actions = executes * RELAYS_PER_EXECUTE;
    // Counted, not kept: the receiver's work is the driver's CPU, never the gateway's.
    const receiver = await OtlpReceiver.start({ keep: false });
    const baselineJs = process.env['BENCH_GATEWAY_BASELINE'];
    const arms: Arm[] = [];
    /** The simulators every arm shares (a stack of no gateway), so that only the gateways differ. */
    let shared: Stack<'process', 'process'> | undefined;
    const arm = async (name: Arm['name'], gatewayEnv: Record<string, string>, mainJs?: string): Promise<void> => {
      const simulators = (shared as Stack<'process', 'process'>).simulators;
      // Redis was emptied once, before any gateway: a flush now would fence the ones started.
      const stack = await startBenchStack(ctx.env, { name: `tracing-${name}`, connections: 256, gatewayEnv, flush: false, simulators, ...(mainJs ? { mainJs } : {}) });
      arms.push({ name, stack, cpuPerExecute: [], cpuPer1000Actions: [], errors: 0 });
    };
    try {
      await ctx.env.redis.flush();
      shared = await startStack({ ...benchStackOptions(ctx.env), replicas: 0 });
      if (baselineJs) await arm('baseline', {}, baselineJs);
      // Off as by default: no endpoint (one inherited from the environment is blanked).
      await arm('off', { OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' });
      await arm('on', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_TRACES_SAMPLER: 'always_on' });
      // Warm every arm (JIT, connections) before measuring any.
      for (const a of arms) {
        await gatewayBurst(a.stack, `tr-${a.name}-warm-`, BURST_SIZE, emptyTally());
        await throughLongrun(a.stack, `tr-${a.name}-rwarm-`, Math.min(actions, 4_000));
      }
      const spansBefore = receiver.received;
      for (let r = 0; r < ROUNDS; r++) {
        for (let i = 0; i < arms.length; i++) {
          const a = arms[(i + r) % arms.length] as Arm;
          // What the shared simulators recorded of the last measurement (all ended by now) is let go.
          await Promise.all([a.stack.owner.query('reset', {}), a.stack.workflow.query('reset', {})]);
          const tally = emptyTally();
          let cpu = a.stack.cpu();
          for (let b = 0; b < executes / BURST_SIZE; b++) await gatewayBurst(a.stack, `tr-${a.name}-${r}-${b}-`, BURST_SIZE, tally);
          const perExecute = cpu.read(Math.max(1, tally.overheads.length))['gateway'] ?? Number.NaN;
          a.errors += Object.values(tally.errors).reduce((x, y) => x + y, 0);
          cpu = a.stack.cpu();
          const relayed = await throughLongrun(a.stack, `tr-${a.name}-r${r}-`, actions);
          const per1000 = cpu.read(relayed.total / 1_000)['gateway'] ?? Number.NaN;
          a.errors += relayed.total - relayed.ok;
          a.cpuPerExecute.push(perExecute);
          a.cpuPer1000Actions.push(per1000);
          ctx.log(`round ${r + 1} ${a.name}: gateway CPU ${perExecute} ms per execute, ${per1000} ms per 1000 relayed actions`);
        }
      }
      const byName = Object.fromEntries(arms.map((a) => [a.name, a])) as Record<Arm['name'], Arm | undefined>;
      const exec = (a: Arm | undefined): number => (a ? median(a.cpuPerExecute) : Number.NaN);
      const relay = (a: Arm | undefined): number => (a ? median(a.cpuPer1000Actions) : Number.NaN);
      const off = byName.off;
      const on = byName.on;
      const figures: Record<string, unknown> = {
        executes_per_round: executes,
        relayed_actions_per_round: actions,
        rounds: ROUNDS,
        cpu_ms_per_execute_off: round(exec(off), 3),
        cpu_ms_per_execute_on: round(exec(on), 3),
        cpu_ms_per_1000_actions_off: round(relay(off), 1),
        cpu_ms_per_1000_actions_on: round(relay(on), 1),
        ratio_execute_on_to_off: ratio(exec(on), exec(off)),
        ratio_actions_on_to_off: ratio(relay(on), relay(off)),
        rounds_cpu_ms_per_execute: Object.fromEntries(arms.map((a) => [a.name, a.cpuPerExecute])),
        rounds_cpu_ms_per_1000_actions: Object.fromEntries(arms.map((a) => [a.name, a.cpuPer1000Actions])),
        // The on arm's spans, all of them: a dropped span would flatter its figure.
        spans_exported: receiver.received - spansBefore,
        errors: Object.fromEntries(arms.map((a) => [a.name, a.errors])),
      };
      if (byName.baseline) {
        figures['cpu_ms_per_execute_baseline'] = round(exec(byName.baseline), 3);
        figures['cpu_ms_per_1000_actions_baseline'] = round(relay(byName.baseline), 1);
        figures['ratio_execute_off_to_baseline'] = ratio(exec(off), exec(byName.baseline));
        figures['ratio_actions_off_to_baseline'] = ratio(relay(off), relay(byName.baseline));
      }
      const errors = arms.reduce((n, a) => n + a.errors, 0);
      return {
        figures,
        row: {
          longrun: `on: ${exec(on).toFixed(3)} ms/execute, ${relay(on).toFixed(0)} ms/1000 actions`,
          baseline: `off: ${exec(off).toFixed(3)} ms/execute, ${relay(off).toFixed(0)} ms/1000 actions`,
          ratio: `${figures['ratio_execute_on_to_off'] ?? 'n/a'}x execute, ${figures['ratio_actions_on_to_off'] ?? 'n/a'}x actions`,
          target: 'measured (no target); 0 errors',
          met: errors === 0 ? null : false,
        },
      };
    } finally {
      await Promise.allSettled(arms.map((a) => a.stack.close()));
      await Promise.allSettled([shared?.close(), receiver.close()]);
    }
  },
};
