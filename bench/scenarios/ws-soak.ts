/**
 * ws_soak (issue [26]): the WebSocket path under reconnecting clients for minutes, as
 * operators load it, watching one replica's memory — the soak that found a replica's heap
 * growing 33 MB an hour, at a smaller scale.
 *
 * Four gateways on a redis-server of the scenario's own (stack/'s startStack with `redis:
 * 'own'`, so it can be restarted empty): a fleet of three that is faulted, and a control that
 * never is. CLIENTS LongrunSession clients each run turns of client-executed reads and
 * relayed writes, one after another (a new workflow each turn), drop their socket (no close
 * frame: the run parks) every DROP_MIN_MS–DROP_MAX_MS, and reconnect on a random gateway —
 * the holder (a same-replica re-attach) or another (bridged through Redis), the control
 * among them. Every FAULT_EVERY_MS one fault, in turn: a fleet replica drained (SIGTERM), a
 * fleet replica SIGKILLed, Redis restarted empty, the workflow service restarted; a drained
 * or killed replica comes back under a new name (a pod's name changes with it).
 *
 * The control's heap is read after a full GC (its /debug/gc) every SAMPLE_EVERY_MS, with the
 * sizes of its per-session, per-link and per-run structures (its /debug/structures, when the
 * build has it). The figures:
 * - the post-GC heap slope under load, MB per hour (least squares over the samples after
 *   the load's first minute);
 * - the idle heap after the load against the idle heap before it: a warm-up of WARM_UP_MS of
 *   the same load first, with one fault of each kind (compiled code, pools, connections), then
 *   every session closed and the control idle (no run, nothing held), measured; then the load
 *   for --minutes; then idle again, measured the same way.
 * Each sample is read after a full GC (the issue's measure) and after a compacting one, which
 * also drops V8's code caches; V8's code and bytecode (its code and trusted spaces) are read
 * apart, and the slope outside them reported too: code compiled and optimized as more of the
 * program gets hot grows for many minutes under a steady load, up to what the program is — it
 * is not held per session, and it is most of what the heap grows by over a ten-minute soak.
 *
 *   npm run bench -- --scenario ws_soak --minutes 10
 *
 * BENCH_GATEWAY_MAIN=<other build>/dist/src/main.js soaks another build (one before the fix,
 * for the before figures); BENCH_SOAK_SNAPSHOTS=<dir> writes a heap snapshot of the control
 * at both idle points (--heapsnapshot-signal), to compare by retainers.
 */
import { mkdirSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import WebSocket from 'ws';
import { LongrunSession, type SessionAction } from '@longrun/client';
import { WEBSOCKET_PREAUTH } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { startStack } from '../../stack';
import type { GatewayChild, HeapUsage } from '../../stack/gateway-child';
import { metricTotal } from '../../stack/metric-text';
import type { RedisServer } from '../../stack/redis-server';
import { benchStackOptions, gatewayMainJs } from '../bench-stack';
import { round } from '../measure/stats';
import type { Scenario, ScenarioOutcome } from '../scenario';

const FLEET = 3;
const CLIENTS = 24;
const DROP_MIN_MS = 4_000;
const DROP_MAX_MS = 8_000;
const FAULT_EVERY_MS = 90_000;
const SAMPLE_EVERY_MS = 30_000;
/** The warm-up: the same load, with one fault of each kind (every WARM_UP_FAULT_EVERY_MS), so their code is compiled before the heap is watched. */
const WARM_UP_MS = 100_000;
const WARM_UP_FAULT_EVERY_MS = 22_000;
/** Samples from the load's first minute are left out of the slope (pools and caches still filling). */
const SLOPE_SKIP_MS = 60_000;
/** A turn: STEPS steps of STEP_MS, each a relayed write, a read the client executes, and a checkpoint. */
const STEPS = 120;
const STEP_MS = 400;
const EXECUTE_MAX_MS = 80;
/** A client drops its socket only this long after its last answer: a reset discards what the gateway has not read yet. */
const ANSWER_FLUSH_MS = 250;
const RESUME_WINDOW_MS = 30_000;
const LEASE_TTL_MS = 6_000;
/** How long the control may take to let go of everything once the sessions are closed. */
const SETTLE_MS = 90_000;
/** Idle before an idle measurement: timers that keep something a while (a lapsed interest, a late answer's sink) run out. */
const IDLE_MS = 20_000;
const ACTOR = 'soak-user';

interface Sample {
  t_s: number;
  heap_mb: number;
  /** After a compacting GC (a low-memory notification's, which also drops V8's code caches). */
  heap_compact_mb: number;
  /**
   * Of heap_mb, what V8's code and bytecode take (its code and trusted spaces): it grows as more
   * of the program is compiled and optimized under load, up to what the program is, not with what the process holds.
   */
  code_mb: number;
  rss_mb: number;
  runs: number;
  /** What the control holds per session, link and run (its /debug/structures `held`), when the build tells. */
  structures?: Record<string, number>;
}

function turnSteps(id: string): Step[] {
  return [
    {
      op: 'turn',
      checkpoints: STEPS,
      intervalMs: STEP_MS,
      write: { method: 'POST', path: `/api/v4/echo?workflow=${id}` },
      client: { action: { runReadFile: { filepath: `${id}/call-{call}/step-{step}.txt` } }, expect: { plainTextResponse: { response: `read ${id}/call-{call}/step-{step}.txt` } } },
    },
    { op: 'end' },
  ];
}

/** What V8's compiled code and bytecode take of the heap (its code and trusted spaces); 0 for a build that reports no spaces. */
function codeBytes(heap: HeapUsage): number {
  const spaces = heap.spaces ?? {};
  return ['code_space', 'code_large_object_space', 'trusted_space', 'trusted_large_object_space'].reduce((n, name) => n + (spaces[name]?.used ?? 0), 0);
}

/** Least-squares slope of `ys` over `xs`. */
function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  if (n < 2) return Number.NaN;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += ((xs[i] as number) - mx) * ((ys[i] as number) - my);
    den += ((xs[i] as number) - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}

interface Counters {
  turns: number;
  turnsFailed: number;
  drops: number;
  connects: number;
}

export const wsSoak: Scenario = {
  name: 'ws_soak',
  sizes: `--minutes of load (default 10) on ${CLIENTS} reconnecting WebSocket clients over ${FLEET} faulted replicas and a control`,
  defaultRuns: CLIENTS,
  onlyWhenNamed: true,
  async run(ctx): Promise<ScenarioOutcome> {
    const minutes = ctx.options.minutes ?? 10;
    const clients = ctx.options.runs ?? CLIENTS;
    const snapshots = process.env['BENCH_SOAK_SNAPSHOTS'];
    if (snapshots) mkdirSync(snapshots, { recursive: true });
    const gatewayEnv = {
      LONGRUN_LEASE_TTL_MS: String(LEASE_TTL_MS),
      LONGRUN_WS_RESUME_WINDOW_MS: String(RESUME_WINDOW_MS),
      LONGRUN_WS_PING_MS: '1000',
      LONGRUN_WS_PONG_TIMEOUT_MS: '3000',
      LONGRUN_WS_CLOSE_TIMEOUT_MS: '1000',
      LONGRUN_STOP_ACK_TIMEOUT_MS: '1000',
      LONGRUN_DRAIN_TIMEOUT_MS: '6000',
      LONGRUN_REDIS_CONNECT_TIMEOUT_MS: '500',
    };
    // Its own redis-server (marked new: the first locks need not wait out the store fence), restarted empty as a fault.
    const stack = await startStack({ ...benchStackOptions(ctx.env), redis: 'own', replicas: 0, name: 'soak', env: gatewayEnv });
    const redis = stack.redis as RedisServer;
    const fleet: Array<GatewayChild | undefined> = [];
    let control: GatewayChild | undefined;
    let generation = 0;
    const counters: Counters = { turns: 0, turnsFailed: 0, drops: 0, connects: 0 };
    const t0 = Date.now();
    // Each under a name of its own: a drained or killed replica comes back under a new one, as a pod's.
    const startGateway = (name: string, nodeArgs: string[] = []): Promise<GatewayChild> => stack.startReplica({ name, nodeArgs });
    const live = (): GatewayChild[] => [...fleet.filter((g): g is GatewayChild => g !== undefined), ...(control ? [control] : [])];
    const wsUrl = (g: GatewayChild): string => `${g.url.replace('http://', 'ws://')}/api/v4/ai/duo_workflows/ws`;
    const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;

    /** One turn of one client, from its start to its session's end; resolves whether it finished (1000). */
    const turn = (id: string, stopping: () => boolean): Promise<boolean> =>
      new Promise<boolean>((resolve) => {
        let lastSentAt = 0;
        let dropTimer: NodeJS.Timeout | undefined;
        const answer = (session: LongrunSession, action: SessionAction): void => {
          const requestID = action.requestID ?? '';
          const filepath = (action['runReadFile'] as { filepath?: string } | undefined)?.filepath ?? '';
          setTimeout(() => {
            if (session.answer(requestID, { plainTextResponse: { response: `read ${filepath}` } })) lastSentAt = Date.now();
          }, Math.random() * EXECUTE_MAX_MS).unref();
        };
        const session = new LongrunSession({
          url: () => {
            counters.connects += 1;
            return wsUrl(pick(live()));
          },
          reconnect: { initialDelayMs: 100, maxDelayMs: 1_000, maxAttempts: 60, windowMs: RESUME_WINDOW_MS },
          idleTimeoutMs: 5_000,
          onAction: (action, s) => answer(s, action),
          onCheckpoint: () => undefined,
          onClose: (close) => {
            clearTimeout(dropTimer);
            closers.delete(closer);
            resolve(close.how === 'closed' && close.code === 1000);
          },
        });
        const drop = (): void => {
          const ws = session.socket;
          if (session.closed || stopping()) return;
          if (ws?.readyState === WebSocket.OPEN && ws.bufferedAmount === 0 && Date.now() - lastSentAt >= ANSWER_FLUSH_MS) {
            ws.terminate();
            counters.drops += 1;
          }
          dropTimer = setTimeout(drop, DROP_MIN_MS + Math.random() * (DROP_MAX_MS - DROP_MIN_MS));
        };
        dropTimer = setTimeout(drop, DROP_MIN_MS + Math.random() * (DROP_MAX_MS - DROP_MIN_MS));
        const start = { workflowID: id, goal: `soak turn ${id}`, workflowMetadata: scenarioMetadata(turnSteps(id)) };
        const closer = (): void => session.close();
        closers.add(closer);
        session.start(start).catch(() => {
          clearTimeout(dropTimer);
          closers.delete(closer);
          resolve(false);
        });
      });
    const closers = new Set<() => void>();

    /** `clients` clients running turns one after another until `until`; then every session is closed (1000). */
    const load = async (phase: string, forMs: number): Promise<void> => {
      const until = Date.now() + forMs;
      const stopping = (): boolean => Date.now() >= until;
      let next = 0;
      const closeAll = setTimeout(() => {
        for (const close of closers) close();
        closers.clear();
      }, forMs);
      await Promise.all(
        Array.from({ length: clients }, async (_, i) => {
          // Spread the starts: every client at once would open every run in the same second.
          await sleep((i * 1_000) / clients);
          while (!stopping()) {
            const id = `soak-${phase}-${i}-${next++}`;
            const finished = await turn(id, stopping);
            counters.turns += 1;
            if (!finished && !stopping()) {
              counters.turnsFailed += 1;
              await sleep(500);
            }
          }
        }),
      );
      clearTimeout(closeAll);
    };

    const structures = async (g: GatewayChild): Promise<Record<string, number> | undefined> => {
      const res = await request(`${g.opsUrl}/debug/structures`).catch(() => undefined);
      if (!res) return undefined;
      if (res.statusCode !== 200) {
        await res.body.dump();
        return undefined;
      }
      return ((await res.body.json()) as { held: Record<string, number> }).held;
    };
    const sample = async (g: GatewayChild): Promise<Sample> => {
      const heap = await g.gc();
      const compact = await g.gc(true);
      const held = await structures(g);
      return {
        t_s: Math.round((Date.now() - t0) / 100) / 10,
        heap_mb: round(heap.heapUsed / 2 ** 20, 2) as number,
        heap_compact_mb: round(compact.heapUsed / 2 ** 20, 2) as number,
        code_mb: round(codeBytes(heap) / 2 ** 20, 2) as number,
        rss_mb: round(g.rss() / 2 ** 20, 1) as number,
        runs: await g.runsInFlight(),
        ...(held ? { structures: held } : {}),
      };
    };
    const describe = (s: Sample): string =>
      `t=${s.t_s} s heap ${s.heap_mb} MB (compacted ${s.heap_compact_mb}, code ${s.code_mb}) rss ${s.rss_mb} MB runs ${s.runs}${s.structures ? ` ${JSON.stringify(Object.fromEntries(Object.entries(s.structures).filter(([, v]) => v !== 0)))}` : ''}`;

    /** Once the sessions are closed: waits for the control to hold no run (and nothing else, when it says), then idles, then measures. */
    const idleMeasure = async (what: string): Promise<Sample> => {
      const g = control as GatewayChild;
      const deadline = Date.now() + SETTLE_MS;
      for (;;) {
        const held = await structures(g);
        const busy = held ? Object.values(held).some((v) => v > 0) : (await g.runsInFlight()) > 0;
        if (!busy || Date.now() > deadline) break;
        await sleep(1_000);
      }
      await sleep(IDLE_MS);
      // Twice: the first compacting GC may leave what only a second one frees (weak callbacks, finalizers).
      await g.gc(true);
      const heap = await g.gc(true);
      const s = {
        ...(await sample(g)),
        heap_mb: round(heap.heapUsed / 2 ** 20, 2) as number,
        heap_compact_mb: round(heap.heapUsed / 2 ** 20, 2) as number,
        code_mb: round(codeBytes(heap) / 2 ** 20, 2) as number,
      };
      ctx.log(`${what}: ${describe(s)}`);
      if (snapshots) ctx.log(`${what}: heap snapshot ${await snapshot(g, snapshots)}`);
      return s;
    };

    const faults: string[] = [];
    const fault = async (n: number): Promise<void> => {
      const kind = (['holder drain', 'holder SIGKILL', 'redis restart (empty)', 'workflow service restart'] as const)[n % 4] as string;
      const at = Math.round((Date.now() - t0) / 1_000);
      if (kind === 'holder drain' || kind === 'holder SIGKILL') {
        const i = Math.floor(Math.random() * FLEET);
        const g = fleet[i] as GatewayChild;
        fleet[i] = undefined;
        // The stack closes it with the others (it stays among stack.replicas, exited).
        if (kind === 'holder drain') {
          g.terminate();
          await g.exited(30_000).catch(() => g.kill());
        } else await g.kill();
        fleet[i] = await startGateway(`soak-${String.fromCharCode(97 + i)}${++generation}`);
      } else if (kind === 'redis restart (empty)') await redis.restart();
      // On its port, with its options: the owner's Service.URI stays right.
      else await stack.restartWorkflow();
      faults.push(`${at} s ${kind}`);
      ctx.log(`fault at ${at} s: ${kind}`);
    };

    try {
      await stack.owner.query('configure', { workflowId: WEBSOCKET_PREAUTH, config: { lockConcurrentFlow: true, actorId: ACTOR } });
      const nodeArgs = snapshots ? [`--heapsnapshot-signal=SIGUSR2`, `--diagnostic-dir=${snapshots}`] : [];
      [control] = await Promise.all([
        startGateway('soak-control', nodeArgs),
        ...Array.from({ length: FLEET }, (_, i) => startGateway(`soak-${String.fromCharCode(97 + i)}0`)),
      ]).then(([c, ...rest]) => {
        fleet.push(...rest);
        return [c];
      });
      ctx.log(`${FLEET} faulted replicas and a control (${gatewayMainJs}); ${clients} clients dropping every ${DROP_MIN_MS / 1_000}–${DROP_MAX_MS / 1_000} s; ${minutes} min`);
      const fresh = await sample(control as GatewayChild);
      ctx.log(`control before any load: ${describe(fresh)}`);

      /** `load` for `forMs`, a fault every `faultEveryMs` meanwhile, and the control sampled every SAMPLE_EVERY_MS into `samples` when given. */
      const phase = async (name: string, forMs: number, faultEveryMs: number, samples?: Sample[]): Promise<void> => {
        const startedAt = Date.now();
        let stop = false;
        const monitor = (async () => {
          let nextSample = startedAt + SAMPLE_EVERY_MS;
          let nextFault = startedAt + faultEveryMs;
          while (!stop) {
            await sleep(250);
            if (!stop && Date.now() >= nextFault) {
              await fault(faultsDone++).catch((err: unknown) => ctx.log(`fault failed: ${(err as Error).message}`));
              nextFault += faultEveryMs;
            }
            if (!stop && samples && Date.now() >= nextSample) {
              const s = await sample(control as GatewayChild).catch(() => undefined);
              if (s) {
                samples.push(s);
                ctx.log(`under load: ${describe(s)}`);
              }
              nextSample += SAMPLE_EVERY_MS;
            }
          }
        })();
        await load(name, forMs);
        stop = true;
        await monitor;
      };
      let faultsDone = 0;

      await phase('warm', WARM_UP_MS, WARM_UP_FAULT_EVERY_MS);
      const before = await idleMeasure('control idle after the warm-up');

      const samples: Sample[] = [];
      const loadStart = Date.now();
      await phase('soak', minutes * 60_000, FAULT_EVERY_MS, samples);
      const after = await idleMeasure('control idle after the load');

      const used = samples.filter((s) => s.t_s * 1_000 >= loadStart - t0 + SLOPE_SKIP_MS);
      const hours = used.map((s) => s.t_s / 3_600);
      const slopeMbPerH = slope(
        hours,
        used.map((s) => s.heap_mb),
      );
      const compactSlopeMbPerH = slope(
        hours,
        used.map((s) => s.heap_compact_mb),
      );
      const outsideCodeSlopeMbPerH = slope(
        hours,
        used.map((s) => s.heap_mb - s.code_mb),
      );
      const reattached = async (how: string): Promise<number> => metricTotal(await (control as GatewayChild).metrics(), 'longrun_websocket_reattached_total', { how }) ?? 0;
      const figures = {
        minutes,
        clients,
        gateway_main: gatewayMainJs,
        turns: counters.turns,
        turns_not_finished: counters.turnsFailed,
        drops: counters.drops,
        connections: counters.connects,
        control_reattached_local: await reattached('local'),
        control_reattached_bridged: await reattached('bridged'),
        faults,
        control_heap_fresh_mb: fresh.heap_mb,
        control_heap_idle_before_mb: before.heap_mb,
        control_heap_idle_after_mb: after.heap_mb,
        control_heap_idle_growth_mb: round(after.heap_mb - before.heap_mb, 2),
        control_heap_slope_mb_per_h: round(slopeMbPerH, 1),
        control_heap_compact_slope_mb_per_h: round(compactSlopeMbPerH, 1),
        control_heap_outside_code_slope_mb_per_h: round(outsideCodeSlopeMbPerH, 1),
        control_code_idle_before_mb: before.code_mb,
        control_code_idle_after_mb: after.code_mb,
        control_rss_idle_before_mb: before.rss_mb,
        control_rss_idle_after_mb: after.rss_mb,
        control_structures_idle_after: after.structures ?? null,
        samples,
      };
      ctx.log(
        `control: post-GC heap slope under load ${figures.control_heap_slope_mb_per_h} MB/h (compacting GC: ${figures.control_heap_compact_slope_mb_per_h}; outside V8's code and bytecode: ${figures.control_heap_outside_code_slope_mb_per_h}) over ${used.length} samples; idle ${before.heap_mb} MB before the load, ${after.heap_mb} MB after (${figures.control_heap_idle_growth_mb} MB)`,
      );
      return {
        figures,
        row: {
          longrun: `${figures.control_heap_slope_mb_per_h} MB/h, idle +${figures.control_heap_idle_growth_mb} MB`,
          baseline: '—',
          ratio: '—',
          target: 'slope < 5 MB/h, idle within a few MB',
          met: Number.isFinite(slopeMbPerH) ? slopeMbPerH < 5 && after.heap_mb - before.heap_mb < 3 : null,
        },
      };
    } finally {
      for (const close of closers) close();
      // Every replica it started, retired ones included, the simulators and the redis-server.
      await stack.close();
    }
  },
};

/** Asks the control for a heap snapshot (SIGUSR2, --heapsnapshot-signal) and waits for the file to be written whole. */
async function snapshot(g: GatewayChild, dir: string): Promise<string> {
  const before = new Set(readdirSync(dir));
  process.kill(g.pid, 'SIGUSR2');
  const deadline = Date.now() + 120_000;
  let file: string | undefined;
  let size = -1;
  while (Date.now() < deadline) {
    await sleep(500);
    file ??= readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (!file) continue;
    const now = statSync(path.join(dir, file)).size;
    // Written whole once its size stops changing and the gateway answers again.
    if (
      now === size &&
      now > 0 &&
      (await g.runsInFlight().then(
        () => true,
        () => false,
      ))
    )
      return path.join(dir, file);
    size = now;
  }
  return 'not written';
}
