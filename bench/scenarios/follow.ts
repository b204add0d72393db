/**
 * follow (docs/spec.md §10, §14): following runs live, over two gateway replicas on one
 * redis-server. Each run is detached on replica A and emits CHECKPOINTS checkpoints,
 * INTERVAL_MS apart, each stamped by the workflow simulator with its send time.
 *
 * 1. quiet: --runs runs nobody follows. What the follow costs them in Redis: the commands
 *    only the follow sends (XADD, PUBLISH, SUBSCRIBE, XRANGE, XREVRANGE, HMGET: the
 *    coordination's own scripts use none of them), which must be 0; and the gateways' CPU,
 *    the baseline of phase 2.
 * 2. followed: the same runs, each with FOLLOWERS_PER_SIDE followers on A (the replica holding
 *    the run: `same`) and as many on B (`across`: the events come through Redis). Latency
 *    from the service's send to each follower; Redis commands per event (phase 2 less phase 1,
 *    over the events); gateway CPU per event per follower (the same difference, over the
 *    events times the followers); ids with a gap or a repeat (must be 0) and events lost.
 * 3. baseline: the same turn as blocking executes on A: latency from the service's send to
 *    the caller's ndjson line, the stream a follower's events are compared with.
 */
import { request } from 'undici';
import type { Step } from '../../sandbox/scenario';
import type { GatewayChild } from '../../stack/gateway-child';
import { closedLoop } from '../clients/load';
import { CpuMeter } from '../../stack/process-stats';
import { commandDelta } from '../measure/bench-redis';
import { formatMs, loopLagP99Ms, type Scenario, type ScenarioOutcome } from '../scenario';
import { gatewayMainJs, startBenchStack } from '../bench-stack';
import { percentile, round } from '../measure/stats';
import { blockingOnce, followOnce, type Reading } from '../clients/follow-client';

const CHECKPOINTS = 50;
const INTERVAL_MS = 20;
const FOLLOWERS_PER_SIDE = 2;
/** Time for the followers to join before the stamped checkpoints begin. */
const JOIN_MS = 1_500;
/** Commands the coordination (locks, leases, records) never sends: what a run nobody follows must not cost. */
const FOLLOW_ONLY_COMMANDS = ['xadd', 'publish', 'subscribe', 'xrange', 'xrevrange', 'hmget'];

function turn(): Step[] {
  return [
    { op: 'checkpoint', text: 'start' },
    { op: 'wait', ms: JOIN_MS },
    {
      op: 'repeat',
      times: CHECKPOINTS,
      steps: [
        { op: 'checkpoint', text: 'step', stamp: true },
        { op: 'wait', ms: INTERVAL_MS },
      ],
    },
    { op: 'checkpoint', text: 'done', status: 'FINISHED' },
    { op: 'end' },
  ];
}

const summary = (samples: readonly number[]): { n: number; p50: number; p99: number } => ({ n: samples.length, p50: percentile(samples, 50), p99: percentile(samples, 99) });

export const follow: Scenario = {
  name: 'follow',
  sizes: `runs (each ${CHECKPOINTS} checkpoints, followed by ${FOLLOWERS_PER_SIDE} on its replica and ${FOLLOWERS_PER_SIDE} on another)`,
  defaultRuns: 20,
  async run(ctx): Promise<ScenarioOutcome> {
    const runs = ctx.options.runs ?? this.defaultRuns;
    const { redis } = ctx.env;
    const stack = await startBenchStack(ctx.env, { replicas: ['follow-a', 'follow-b'] });
    const gateways = stack.replicas;
    try {
      const [a, b] = gateways as [GatewayChild, GatewayChild];
      const body = JSON.stringify({ goal: 'bench', workflowMetadata: JSON.stringify({ scenario: turn() }) });
      // Started spread over one interval, as runs are: not all sending in the same millisecond.
      const detached = async (id: string, i: number): Promise<void> => {
        await new Promise((resolve) => setTimeout(resolve, (i * INTERVAL_MS) / runs));
        const res = await request(`${a.url}/api/v4/ai/duo_workflows/workflows/${id}/execute`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const text = await res.body.text();
        if (res.statusCode !== 202) throw new Error(`execute of ${id} answered ${res.statusCode}: ${text}`);
      };
      const done = async (prefix: string, n: number): Promise<void> => {
        for (;;) {
          const ends = await stack.owner.query('segmentEnds', { prefix });
          if (Object.values(ends).reduce((x, y) => x + y, 0) >= n) return;
          await new Promise((r) => setTimeout(r, 50));
        }
      };
      const meter = (): CpuMeter =>
        new CpuMeter({ gateway_a: a.pid, gateway_b: b.pid, redis: redis.pid, workflow_sim: stack.workflow.pid, owner_sim: stack.owner.pid, driver: process.pid }).start();
      ctx.log(`2 gateways (${gatewayMainJs}); ${runs} runs of ${CHECKPOINTS} checkpoints ${INTERVAL_MS} ms apart, per phase`);

      // Warm-up (not measured): both replicas' follow paths, compiled and connected.
      await closedLoop(2, 2, async (i) => {
        await detached(`follow-warm-${i}`, i);
        await Promise.all([followOnce(a.url, `follow-warm-${i}`).done, followOnce(b.url, `follow-warm-${i}`).done]);
      });

      // 1. Nobody follows.
      await Promise.all(gateways.map((g) => g.metrics()));
      let before = await redis.commands();
      let cpu = meter();
      await closedLoop(runs, runs, async (i) => detached(`follow-quiet-${i}`, i));
      await done('follow-quiet-', runs);
      const quietCpu = cpu.read();
      const quiet = commandDelta(before, await redis.commands());
      const quietLag = loopLagP99Ms(await a.metrics());
      const followCommandsQuiet = FOLLOW_ONLY_COMMANDS.reduce((n, name) => n + (quiet.byName[name] ?? 0), 0);

      // 2. Followed, on both replicas.
      await Promise.all(gateways.map((g) => g.metrics()));
      before = await redis.commands();
      cpu = meter();
      const readings = { same: [] as Reading[], across: [] as Reading[] };
      await closedLoop(runs, runs, async (i) => {
        const id = `follow-seen-${i}`;
        await detached(id, i);
        const followers = [
          ...Array.from({ length: FOLLOWERS_PER_SIDE }, () => ['same', followOnce(a.url, id)] as const),
          ...Array.from({ length: FOLLOWERS_PER_SIDE }, () => ['across', followOnce(b.url, id)] as const),
        ];
        for (const [side, w] of followers) readings[side].push(await w.done);
      });
      await done('follow-seen-', runs);
      const seenCpu = cpu.read();
      const seen = commandDelta(before, await redis.commands());
      const [lagA, lagB] = await Promise.all(gateways.map(async (g) => loopLagP99Ms(await g.metrics())));

      // 3. The baseline: the same turn to a blocking caller.
      for (let i = 0; i < runs; i++) await stack.owner.query('configure', { workflowId: `follow-blocking-${i}`, config: { detached: false } });
      const blocking: Reading[] = [];
      await closedLoop(runs, runs, async (i) => {
        blocking.push(await blockingOnce(a.url, `follow-blocking-${i}`, body));
      });

      const events = runs * CHECKPOINTS;
      const followers = runs * FOLLOWERS_PER_SIDE * 2;
      const same = summary(readings.same.flatMap((r) => r.latencies));
      const across = summary(readings.across.flatMap((r) => r.latencies));
      const direct = summary(blocking.flatMap((r) => r.latencies));
      const all = [...readings.same, ...readings.across];
      const received = all.reduce((n, r) => n + r.latencies.length, 0);
      const beforeJoin = all.reduce((n, r) => n + r.sentBeforeJoin, 0);
      const lateJoins = all.filter((r) => r.sentBeforeJoin > 0).length;
      // Every stamped checkpoint sent after a follower joined reached it (the one before, at most, in its start).
      const lost = followers * CHECKPOINTS - received - beforeJoin;
      const idBreaks = all.reduce((n, r) => n + r.idBreaks, 0);
      const notIdle = all.filter((r) => r.kinds.at(-1) !== 'idle').length;
      const gatewayCpu = (r: Record<string, number>): number => (r['gateway_a'] ?? 0) + (r['gateway_b'] ?? 0);
      const cpuPerEventPerFollower = (gatewayCpu(seenCpu) - gatewayCpu(quietCpu)) / (events * followers);
      const commandsPerEvent = (seen.total - quiet.total) / events;
      // INFO commandstats counts a script's call (EVALSHA) and every command it runs inside Redis; the calls alone are the round trips.
      const scriptCallsPerEvent = ((seen.byName['evalsha'] ?? 0) - (quiet.byName['evalsha'] ?? 0)) / events;

      ctx.log(
        `latency service → follower: same replica p50 ${formatMs(same.p50)}, p99 ${formatMs(same.p99)} over ${same.n}; across p50 ${formatMs(across.p50)}, p99 ${formatMs(across.p99)} over ${across.n}; ` +
          `blocking caller p50 ${formatMs(direct.p50)}, p99 ${formatMs(direct.p99)} over ${direct.n}`,
      );
      ctx.log(
        `redis: ${followCommandsQuiet} follow commands for ${runs} runs nobody followed (${quiet.total} in all: ${JSON.stringify(quiet.byName)}); followed ${seen.total} (${JSON.stringify(seen.byName)}): ${round(commandsPerEvent, 2)} more per event`,
      );
      ctx.log(
        `event-loop lag p99 while followed: a ${formatMs(lagA ?? Number.NaN)}, b ${formatMs(lagB ?? Number.NaN)} (a unfollowed: ${formatMs(quietLag)}); CPU ms quiet ${JSON.stringify(quietCpu)}; followed ${JSON.stringify(seenCpu)}; lost ${lost}, id breaks ${idBreaks}, streams not ended idle ${notIdle}; ${lateJoins} followers joined after the first stamped checkpoint (${beforeJoin} sent before they joined)`,
      );
      const met = followCommandsQuiet === 0 && lost === 0 && idBreaks === 0 && notIdle === 0;
      return {
        figures: {
          runs,
          events,
          followers,
          followers_per_run_same_replica: FOLLOWERS_PER_SIDE,
          followers_per_run_across: FOLLOWERS_PER_SIDE,
          latency_same_p50_ms: round(same.p50, 2),
          latency_same_p99_ms: round(same.p99, 2),
          latency_across_p50_ms: round(across.p50, 2),
          latency_across_p99_ms: round(across.p99, 2),
          blocking_latency_p50_ms: round(direct.p50, 2),
          blocking_latency_p99_ms: round(direct.p99, 2),
          cpu_ms_per_event_per_follower: round(cpuPerEventPerFollower, 4),
          loop_lag_p99_ms: { gateway_a: round(lagA ?? Number.NaN, 1), gateway_b: round(lagB ?? Number.NaN, 1), gateway_a_unfollowed: round(quietLag, 1) },
          cpu_ms_quiet: quietCpu,
          cpu_ms_followed: seenCpu,
          redis_commands_per_event: round(commandsPerEvent, 3),
          redis_script_calls_per_event: round(scriptCallsPerEvent, 3),
          redis_follow_commands_no_follower: followCommandsQuiet,
          redis_commands_no_follower: quiet.byName,
          redis_commands_followed: seen.byName,
          events_lost: lost,
          late_joins: lateJoins,
          checkpoints_sent_before_join: beforeJoin,
          id_gaps_or_repeats: idBreaks,
          streams_not_ended_idle: notIdle,
          gateway: gatewayMainJs,
        },
        row: {
          longrun: `same replica p99 ${formatMs(same.p99)}, across p99 ${formatMs(across.p99)}; ${round(commandsPerEvent, 2)} Redis cmds/event, ${followCommandsQuiet} unfollowed; ${round(cpuPerEventPerFollower * 1_000, 1)} µs CPU/event/follower`,
          baseline: `blocking caller p99 ${formatMs(direct.p99)}`,
          ratio: `${round(across.p99 / direct.p99, 2) ?? 'n/a'}x p99 across`,
          target: '0 Redis commands unfollowed; 0 lost, no id gap',
          met,
        },
      };
    } finally {
      await stack.close();
    }
  },
};
