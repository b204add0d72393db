/**
 * ws_resume (docs/spec.md §10, §12): WebSocket sessions whose client drops its socket
 * mid-turn and reconnects, over two gateway replicas on one redis-server.
 *
 * Each session is a turn of client-executed actions (`client` steps: the service awaits
 * each answer before the next), answered by the driver as soon as each arrives. Every
 * SEGMENT_ACTIONS actions the driver leaves the latest one unanswered and terminates the
 * socket (no close frame: the gateway parks the run), then opens a new one and sends the
 * resume start `{startRequest:{workflowID, goal:''}}` — on the replica holding the run,
 * or on the other (which bridges the socket to the holder through Redis), by DROP_TARGETS:
 *
 * - re-attach latency: from the terminate to the first frame on the new socket (which must
 *   be the action left unanswered), by where the lost and the new socket were: `local`
 *   (both on the holder: the same-replica figure), `bridged` (lost on the holder, back on
 *   the other), `return` (lost through a bridge, back on the holder);
 * - added latency per bridged message: each action's round trip at the client (answer
 *   sent → next action received, through the gateway, the service and back), on a socket
 *   attached to the holder (direct) and on one bridged from the other replica, from the
 *   same sessions, interleaved in time. A round trip crosses the bridge twice (the answer
 *   in, the next action out), so the added latency one way is half the difference of the
 *   two distributions' percentiles (the samples are not paired: it is the difference of
 *   percentiles, not a percentile of differences);
 * - actions lost and duplicated, counted over every session, the warm-up's too (resume-ledger.ts);
 * - the baseline: sessions of the same turn with no drop, interleaved with the others
 *   (turn time, round trips).
 *
 * A replica that refuses a re-attach with 1013 for the whole retry budget (no bridge: it
 * sees only the holder's lock) makes the bridged figures "unavailable": later drops go to
 * the holder and the session carries on. A 1013 within the budget is retried (the gateway
 * may not have parked the run yet) and counted. The owner's WebSocket preauth names an
 * actor (without one there is no re-attach) and asks for LockConcurrentFlow.
 *
 * BENCH_GATEWAY_MAIN=<other build>/dist/src/main.js measures another build.
 */
import { WEBSOCKET_PREAUTH } from '../../sandbox/owner-sim';
import { workhorseKeys } from '../../src/redis/keys';
import type { GatewayChild } from '../../stack/gateway-child';
import { metricTotal } from '../../stack/metric-text';
import { closedLoop } from '../clients/load';
import { waitUntil } from '../../stack/wait';
import { commandDelta } from '../measure/bench-redis';
import { reattachKinds, runSession, type ReattachKind, type SessionPlan, type SessionRecord } from '../clients/resume-client';
import { countActions } from '../measure/resume-ledger';
import { formatMs, type Scenario, type ScenarioOutcome } from '../scenario';
import { gatewayMainJs, startBenchStack } from '../bench-stack';
import { median, percentile, ratio, round } from '../measure/stats';

const GATEWAYS = 2;
const PREFIX = 'wsresume-';
/** Sessions in flight at once: enough to load both replicas, few enough that queueing stays small on two cores. */
const CONCURRENCY = 8;
/** Actions between two drops (and before the first, and after the last). */
const SEGMENT_ACTIONS = 40;
/** Where each drop's re-attach goes: the holder, or the other replica. */
const DROP_TARGETS = ['holder', 'other', 'holder', 'holder', 'other', 'holder'] as const;
/** A baseline session (no drop) after every BASELINE_EVERY sessions that drop. */
const BASELINE_EVERY = 2;
/** How long a re-attach refused 1013 is retried before the replica counts as not bridging. */
const RETRY_BUDGET_MS = 2_000;
const SESSION_TIMEOUT_MS = 30_000;
/** Sessions run first and not timed (each of the plan's kinds, on both replicas); their actions are counted with the rest. */
const WARM_SESSIONS = 8;
const WARM_BUDGET_MS = 15_000;
/** No session starts after this, in the warm-up or the measured phase (the scenario ends by itself within ~2 minutes). */
const SESSIONS_BUDGET_MS = 60_000;
const TARGET_BRIDGE_ADDED_P99_MS = 20;
/** The gateway's default, said here: a parked run waits this long for its client. */
const RESUME_WINDOW_MS = 60_000;
const ACTOR = 'user-7';

interface Planned {
  workflowId: string;
  holder: number;
  drops: boolean;
}

function plan(sessions: number, prefix: string): Planned[] {
  const out: Planned[] = [];
  for (let i = 0; i < sessions; i++) {
    out.push({ workflowId: `${prefix}${i}`, holder: out.length % GATEWAYS, drops: true });
    if ((i + 1) % BASELINE_EVERY === 0) out.push({ workflowId: `${prefix}base-${i}`, holder: out.length % GATEWAYS, drops: false });
  }
  return out;
}

/** Runs the planned sessions, CONCURRENCY at a time; none starts once `budgetMs` has passed. */
async function runAll(planned: Planned[], urls: string[], bridge: SessionPlan['bridge'], budgetMs: number): Promise<{ records: SessionRecord[]; skipped: number }> {
  const actions = SEGMENT_ACTIONS * (DROP_TARGETS.length + 1);
  const records: SessionRecord[] = [];
  const started = performance.now();
  let skipped = 0;
  await closedLoop(planned.length, CONCURRENCY, async (i) => {
    const session = planned[i] as Planned;
    if (performance.now() - started > budgetMs) {
      skipped += 1;
      return;
    }
    const other = (session.holder + 1) % GATEWAYS;
    records.push(
      await runSession({
        workflowId: session.workflowId,
        gateways: urls,
        holder: session.holder,
        actions,
        drops: session.drops ? DROP_TARGETS.map((t, d) => ({ afterActions: SEGMENT_ACTIONS * (d + 1), to: t === 'holder' ? session.holder : other })) : [],
        retryBudgetMs: RETRY_BUDGET_MS,
        deadline: performance.now() + SESSION_TIMEOUT_MS,
        bridge,
      }),
    );
  });
  return { records, skipped };
}

function summary(samples: readonly number[]): { n: number; p50: number; p99: number } {
  return { n: samples.length, p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

async function gatewayCounts(gateways: readonly GatewayChild[]): Promise<Record<string, number>> {
  const texts = await Promise.all(gateways.map((g) => g.metrics()));
  const sum = (name: string, labels: Record<string, string> = {}): number => texts.reduce((n, t) => n + (metricTotal(t, name, labels) ?? 0), 0);
  const out: Record<string, number> = { parked: sum('longrun_websocket_parked_total') };
  for (const how of ['local', 'bridged']) out[`reattached_${how}`] = sum('longrun_websocket_reattached_total', { how });
  for (const why of ['expired', 'backlog_full', 'taken_over']) out[`park_ends_${why}`] = sum('longrun_websocket_park_ends_total', { why });
  for (const code of ['1012', '1013']) out[`closes_${code}`] = sum('longrun_websocket_closes_total', { code });
  // A build before the bridge has none of these: they read 0.
  for (const why of ['gap', 'send_failed', 'peer_silent', 'peer_dropped', 'unanswered']) out[`bridge_breaks_${why}`] = sum('longrun_bridge_breaks_total', { why });
  return out;
}

export const wsResume: Scenario = {
  name: 'ws_resume',
  sizes: `sessions that drop ${DROP_TARGETS.length} times each (plus one no-drop baseline session per ${BASELINE_EVERY})`,
  defaultRuns: 100,
  // Five processes and two gateways started, then about a minute of sessions on two cores.
  onlyWhenNamed: true,
  async run(ctx): Promise<ScenarioOutcome> {
    const sessions = ctx.options.runs ?? this.defaultRuns;
    const { redis } = ctx.env;
    const stack = await startBenchStack(ctx.env, {
      replicas: Array.from({ length: GATEWAYS }, (_, i) => `resume-${i}`),
      gatewayEnv: {
        LONGRUN_WS_RESUME_WINDOW_MS: String(RESUME_WINDOW_MS),
        // Liveness traffic as a client sees it, short; the drops are terminates, seen at once.
        LONGRUN_WS_PING_MS: '2000',
        LONGRUN_WS_PONG_TIMEOUT_MS: '5000',
      },
    });
    const gateways = stack.replicas;
    try {
      await stack.owner.query('configure', { workflowId: WEBSOCKET_PREAUTH, config: { lockConcurrentFlow: true, actorId: ACTOR } });
      ctx.log(
        `${GATEWAYS} gateways (${gatewayMainJs}); ${sessions} sessions dropping ${DROP_TARGETS.length} times each every ${SEGMENT_ACTIONS} actions, ${CONCURRENCY} at a time`,
      );

      const planned = plan(sessions, PREFIX);
      const actions = SEGMENT_ACTIONS * (DROP_TARGETS.length + 1);
      const bridge = { unavailable: false };
      const urls = gateways.map((g) => g.url);
      // Warm-up, not measured: compiled code, connections and pools on both replicas, the bridge path included.
      const warm = await runAll(plan(WARM_SESSIONS, `${PREFIX}warm-`), urls, bridge, WARM_BUDGET_MS);
      const warmFailed = warm.records.filter((r) => r.end !== '1000').length;
      ctx.log(`warm-up: ${warm.records.length} sessions, ${warmFailed} did not end 1000`);
      const commandsBefore = await redis.commands();
      // gateway_0, gateway_1, owner_sim, workflow_sim, redis, driver.
      const cpu = stack.cpu();
      const started = performance.now();
      const { records, skipped } = await runAll(planned, urls, bridge, SESSIONS_BUDGET_MS);
      const elapsedMs = performance.now() - started;
      const totalActions = records.length * actions;
      const cpuPer1000 = cpu.read(totalActions / 1_000);
      const commands = commandDelta(commandsBefore, await redis.commands());

      // Every call ended (a session that gave up leaves its run parked until its window: not waited for).
      await waitUntil(async () => (await stack.workflow.query('callCounts', { prefix: PREFIX })).open === 0, 5_000, 'every call to end').catch((err: unknown) =>
        ctx.log((err as Error).message),
      );
      const calls = await stack.workflow.query('answers', { prefix: PREFIX });
      const ledger = countActions([...warm.records, ...records], calls);
      const open = (await stack.workflow.query('callCounts', { prefix: PREFIX })).open;
      const locksLeft = await redis.count(workhorseKeys.lock(`${PREFIX}*`));
      const recordsLeft = await redis.count(workhorseKeys.run(`${PREFIX}*`));
      const runsLeft = (await Promise.all(gateways.map((g) => g.runsInFlight()))).reduce((a, b) => a + b, 0);
      const counts = await gatewayCounts(gateways);

      const drops = new Set(planned.filter((p) => p.drops).map((p) => p.workflowId));
      const dropping = records.filter((r) => drops.has(r.workflowId));
      const baseline = records.filter((r) => !drops.has(r.workflowId));
      const reattach = Object.fromEntries(reattachKinds.map((k) => [k, dropping.flatMap((r) => r.reattaches.filter((s) => s.kind === k))])) as Record<
        ReattachKind,
        SessionRecord['reattaches']
      >;
      const latency = Object.fromEntries(reattachKinds.map((k) => [k, summary(reattach[k].map((s) => s.ms))])) as Record<ReattachKind, ReturnType<typeof summary>>;
      const retries = Object.fromEntries(reattachKinds.map((k) => [k, reattach[k].reduce((n, s) => n + s.retries, 0)]));
      const replayMismatches = reattachKinds.reduce((n, k) => n + reattach[k].filter((s) => !s.replayedUnanswered).length, 0);
      const direct = summary(dropping.flatMap((r) => r.rtt.direct));
      const bridged = summary(dropping.flatMap((r) => r.rtt.bridged));
      const baseRtt = summary(baseline.flatMap((r) => r.rtt.direct));
      const bridgeAvailable = !bridge.unavailable && bridged.n > 0;
      const addedP50 = bridgeAvailable ? (bridged.p50 - direct.p50) / 2 : Number.NaN;
      const addedP99 = bridgeAvailable ? (bridged.p99 - direct.p99) / 2 : Number.NaN;
      const refusals = dropping.flatMap((r) => r.bridgeRefusals);
      const unavailable = bridgeAvailable
        ? undefined
        : refusals.length > 0
          ? `another replica refused every re-attach for ${RETRY_BUDGET_MS} ms: close ${refusals[0]?.code} ${JSON.stringify(refusals[0]?.reason)} (${refusals.length} sessions)`
          : 'no bridged re-attach measured';
      const fresh = summary(records.map((r) => r.firstFrameMs).filter(Number.isFinite));
      const recoveries = dropping.flatMap((r) => r.recoveries);
      const recovery = summary(recoveries.map((r) => r.ms));
      const turnDrops = median(dropping.filter((r) => r.end === '1000').map((r) => r.turnMs));
      const turnBase = median(baseline.filter((r) => r.end === '1000').map((r) => r.turnMs));
      const failed = records.filter((r) => r.end !== '1000');
      const sessionErrors = records.flatMap((r) => r.errors.map((e) => `${r.workflowId}: ${e}`));

      ctx.log(`fresh start (connect → first action): p50 ${formatMs(fresh.p50)}, p99 ${formatMs(fresh.p99)} over ${fresh.n}`);
      for (const kind of reattachKinds) {
        if (latency[kind].n > 0)
          ctx.log(`re-attach ${kind}: p50 ${formatMs(latency[kind].p50)}, p99 ${formatMs(latency[kind].p99)} over ${latency[kind].n} (${retries[kind]} retries after 1013)`);
      }
      if (recovery.n > 0) ctx.log(`reconnects after the gateway closed 1012: ${recovery.n}, p50 ${formatMs(recovery.p50)} (1012 close → first frame)`);
      ctx.log(
        `round trip direct: p50 ${formatMs(direct.p50)}, p99 ${formatMs(direct.p99)} over ${direct.n}; bridged: ${bridgeAvailable ? `p50 ${formatMs(bridged.p50)}, p99 ${formatMs(bridged.p99)} over ${bridged.n}` : `unavailable (${unavailable})`}; no-drop baseline p50 ${formatMs(baseRtt.p50)}, p99 ${formatMs(baseRtt.p99)}`,
      );
      ctx.log(
        `${records.length} sessions (${skipped} skipped past the budget) in ${Math.round(elapsedMs)} ms, ${failed.length} did not end 1000 ${JSON.stringify(failed.slice(0, 5).map((r) => `${r.workflowId}: ${r.end}`))}; ` +
          `actions sent ${ledger.actionsSent}, lost ${ledger.lost} (${ledger.lostActions} actions, ${ledger.lostAnswers} answers), duplicated ${ledger.duplicated}, reordered ${ledger.reordered}, unanswered ${ledger.unanswered}, unknown ${ledger.unknown}, extra starts ${ledger.extraStarts}, calls not clean ${ledger.callsNotClean}; ` +
          `gateways ${JSON.stringify(counts)}; left: ${open} calls, ${locksLeft} locks, ${recordsLeft} run records, ${runsLeft} runs`,
      );
      if (ledger.examples.length > 0) ctx.log(`ledger: ${ledger.examples.join('; ')}`);
      if (sessionErrors.length > 0) ctx.log(`session errors: ${sessionErrors.slice(0, 5).join('; ')}`);
      ctx.log(`CPU ms per 1 000 actions ${JSON.stringify(cpuPer1000)}; redis ${commands.total} commands ${JSON.stringify(commands.byName)}`);

      const r = ratio(turnDrops, turnBase);
      const clean =
        ledger.lost === 0 && ledger.duplicated === 0 && ledger.reordered === 0 && ledger.unknown === 0 && ledger.extraStarts === 0 && failed.length === 0 && replayMismatches === 0;
      const lat = (s: ReturnType<typeof summary>): string => (s.n > 0 ? `p50 ${formatMs(s.p50)}, p99 ${formatMs(s.p99)}` : 'n/a');
      return {
        figures: {
          sessions: dropping.length,
          baseline_sessions: baseline.length,
          reattach_samples: latency.local.n,
          reattach_p50_ms: round(latency.local.p50, 1),
          reattach_p99_ms: round(latency.local.p99, 1),
          bridged_reattach_samples: latency.bridged.n,
          bridged_reattach_p50_ms: round(latency.bridged.p50, 1),
          bridged_reattach_p99_ms: round(latency.bridged.p99, 1),
          return_reattach_samples: latency.return.n,
          return_reattach_p50_ms: round(latency.return.p50, 1),
          return_reattach_p99_ms: round(latency.return.p99, 1),
          reattach_retries_after_1013: retries,
          fresh_start_samples: fresh.n,
          fresh_start_p50_ms: round(fresh.p50, 1),
          fresh_start_p99_ms: round(fresh.p99, 1),
          reconnects_after_1012: recovery.n,
          reattaches_closed_1012: dropping.reduce((n, r) => n + r.reattachesClosed1012, 0),
          reconnect_after_1012_p50_ms: round(recovery.p50, 1),
          reconnect_after_1012_max_ms: round(
            percentile(
              recoveries.map((r) => r.ms),
              100,
            ),
            1,
          ),
          bridge_unavailable: unavailable,
          bridge_added_p50_ms: round(addedP50, 2),
          bridge_added_p99_ms: round(addedP99, 2),
          direct_rtt_samples: direct.n,
          direct_rtt_p50_ms: round(direct.p50, 2),
          direct_rtt_p99_ms: round(direct.p99, 2),
          bridged_rtt_samples: bridged.n,
          bridged_rtt_p50_ms: round(bridged.p50, 2),
          bridged_rtt_p99_ms: round(bridged.p99, 2),
          baseline_rtt_p50_ms: round(baseRtt.p50, 2),
          baseline_rtt_p99_ms: round(baseRtt.p99, 2),
          turn_ms_p50: round(turnDrops, 0),
          baseline_turn_ms_p50: round(turnBase, 0),
          turn_ratio: r,
          actions_per_turn: actions,
          actions_sent: ledger.actionsSent,
          actions_lost: ledger.lost,
          actions_lost_on_the_way_out: ledger.lostActions,
          answers_lost_on_the_way_in: ledger.lostAnswers,
          actions_duplicated: ledger.duplicated,
          actions_reordered: ledger.reordered,
          actions_unanswered: ledger.unanswered,
          actions_unknown: ledger.unknown,
          replays_not_the_unanswered_action: replayMismatches,
          extra_starts_at_service: ledger.extraStarts,
          calls_not_clean: ledger.callsNotClean,
          sessions_failed: failed.length,
          sessions_failed_examples: failed.slice(0, 5).map((f) => `${f.workflowId}: ${f.end}`),
          sessions_skipped: skipped,
          warmup_sessions: warm.records.length,
          warmup_sessions_failed: warmFailed,
          gateway_counts: counts,
          calls_open_after: open,
          locks_left: locksLeft,
          run_records_left: recordsLeft,
          runs_left: runsLeft,
          cpu_ms_per_1000_actions: cpuPer1000,
          redis_commands_per_1000_actions: round((commands.total / totalActions) * 1_000, 1),
          redis_commands_by_name: commands.byName,
          elapsed_ms: Math.round(elapsedMs),
          gateway: gatewayMainJs,
        },
        row: {
          longrun:
            `re-attach same replica ${lat(latency.local)}; bridged ${bridgeAvailable ? `${lat(latency.bridged)}, added per message one way p99 ${formatMs(addedP99)}` : 'unavailable'}; ` +
            `lost ${ledger.lost}, duplicated ${ledger.duplicated}${recovery.n > 0 ? `; ${recovery.n} reconnects after 1012` : ''}`,
          baseline: `fresh start to first action ${lat(fresh)}; no drop: turn ${formatMs(turnBase)}, round trip ${lat(baseRtt)}`,
          ratio: r === null ? 'n/a' : `${r}x turn`,
          target: `0 lost, 0 duplicated; bridged added p99 <= ${TARGET_BRIDGE_ADDED_P99_MS} ms`,
          // The bridge's target cannot be met unmeasured; a loss or a duplicate fails the row either way.
          met: !clean ? false : bridgeAvailable ? addedP99 <= TARGET_BRIDGE_ADDED_P99_MS : null,
        },
      };
    } finally {
      await stack.close();
    }
  },
};
