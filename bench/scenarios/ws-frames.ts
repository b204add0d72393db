/**
 * ws_frames (docs/spec.md §10–§12; issue [18]): what one WebSocket frame costs, each way,
 * on the direct path (the client's socket on the replica holding the run) and on the
 * bridged one (the socket on replica 1, the run held by replica 0, the two bridged through
 * Redis), and the wire bytes of a session. Two gateway replicas on the one redis-server,
 * the owner's WebSocket preauth with LockConcurrentFlow and an actor (ws_resume's set-up).
 *
 * A pass is SESSIONS sessions on one path at once, each a turn that holds (frames-client.ts:
 * a client action the client answers only when the scenario releases it) between phases,
 * so each phase's meters — CPU per process (/proc), Redis CPU (INFO cpu), Redis commands
 * (INFO commandstats: as the gateways sent them, an EVALSHA once, and with the commands
 * the build's scripts ran inside Redis), Redis bytes in and out (INFO stats) and the client
 * sockets' bytes — are read around that phase alone:
 *
 * - to the client, paced (`*_cpu_ms_per_frame_to_client`): the first session of the pass
 *   alone, the others waiting at their next hold, reads checkpoints sent PACE_MS apart:
 *   each frame its own wake-up at every hop, as a service streaming a reply at its own
 *   pace sends them, and as each leg of a round trip is.
 * - round trips (`*_cpu_ms_per_round_trip`): the first session alone again, client actions
 *   each answered as it arrives (the service awaits each answer), the service waiting
 *   PACE_MS before each, as before each checkpoint: the same rate of wake-ups (on this VM
 *   one costs more the longer the process slept: unpaced, a direct round trip cost less
 *   CPU than one paced checkpoint). The protocol has no answer without an action first, so
 *   a frame to the service (`*_cpu_ms_per_frame_to_service`) is a round trip less a paced
 *   frame to the client.
 * - every session at once: checkpoints streamed back to back, as fast as flow control lets
 *   them through, and round trips (`..._streamed`, `..._round_trip_concurrent`). Frames of
 *   several sessions share wake-ups and system calls: what a busier replica pays per frame.
 *   Four sessions paced in step read 2.6 frames per bridge read against one alone, which
 *   is why the frames measured each way have a session to themselves (the bridge reads per
 *   frame are reported for every phase: `bridged_frames_per_bridge_read`).
 *
 * --runs frames per phase and path over every pass, 1/SESSIONS of that in the phases of one
 * session alone. Each phase also carries the answers that release it, one per session
 * released: one frame in hundreds. The gateways' idle CPU (lease renewals, bridge beats,
 * pings) is measured apart, with bridged sessions held, and not subtracted. Passes
 * alternate paths (direct, bridged, then bridged, direct, ROUNDS times in all), after a
 * warm-up pass of each; the figures are over every pass (summed CPU over summed frames),
 * each pass's beside them.
 *
 * A scenario of its own, not phases of ws_resume: there sessions drop and re-attach all
 * along, eight at a time, so no window holds the frames of one path and one direction only.
 *
 * Bytes per session: TYPICAL_SESSIONS sessions per path of one turn — five client actions
 * and twenty checkpoints — from connect to close, every byte of every socket (a bridged
 * session's first socket, on the holder and dropped at the first action, included), and
 * Redis's bytes in and out for it. Memory per session is ws_capacity's.
 *
 * BENCH_GATEWAY_MAIN=<other build>/dist/src/main.js measures another build.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Step } from '../../sandbox/scenario';
import { WEBSOCKET_PREAUTH } from '../../sandbox/owner-sim';
import { answeredStep, FrameSession, holdStep, type FrameCounts } from '../clients/frames-client';
import type { GatewayChild } from '../../stack/gateway-child';
import { scriptCommands } from '../measure/script-commands';
import { addReadings, clientCounts, emptyReading, PhaseMeters, total, type Reading } from '../measure/phase-meters';
import { waitUntil } from '../../stack/wait';
import type { Scenario, ScenarioOutcome } from '../scenario';
import { gatewayMainJs, startBenchStack } from '../bench-stack';
import { round } from '../measure/stats';

const PREFIX = 'wsframes-';
const HOLDER = 0;
/** The replica a bridged session's socket is on. */
const SOCKET_REPLICA = 1;
/** Sessions of a pass, all at once: a few, as one replica serves several chats; few enough that two cores do not queue them. */
const SESSIONS = 4;
/** Each path measured in this many passes, alternating, --runs frames per phase in all. */
const ROUNDS = 4;
/** A warm-up pass per path as long as a measured pass at the default size. */
const WARM_FRAMES_PER_SESSION = 500;
/** Before each frame the service sends in the paced phases (a checkpoint, an action): one frame per wake-up at every hop. */
const PACE_MS = 1;
/** A streamed chunk of a reply, padded to this many bytes of text (what the simulator's checkpoint carries besides: its status and token usage). */
const CHECKPOINT_TEXT_BYTES = 200;
/** The typical turn's sessions per path, SESSIONS at a time. */
const TYPICAL_SESSIONS = 32;
/** The typical turn: this many client actions, each followed by TYPICAL_CHECKPOINTS_EACH checkpoints. */
const TYPICAL_ACTIONS = 5;
const TYPICAL_CHECKPOINTS_EACH = 4;
const IDLE_MS = 2_000;
/** One phase, one pass's set-up or end; past it the scenario fails (every socket it opened is closed). */
const PHASE_TIMEOUT_MS = 30_000;
/** No measured pass starts after this (the scenario ends within about a minute). */
const PASSES_BUDGET_MS = 40_000;
const ACTOR = 'user-7';

const paths = ['direct', 'bridged'] as const;
type Path = (typeof paths)[number];
/** In the order a session's turn goes through them. */
const phases = ['paced', 'round_trips', 'streamed', 'round_trips_concurrent'] as const;
type Phase = (typeof phases)[number];
/** The phases the first session of a pass runs alone, the others waiting at their next hold: one frame per wake-up at every hop. */
const alone: ReadonlySet<Phase> = new Set(['paced', 'round_trips']);

const checkpoint: Step = { op: 'checkpoint', text: 'chunk', bytes: CHECKPOINT_TEXT_BYTES };

const phaseSteps: Record<Phase, Step[]> = {
  paced: [checkpoint, { op: 'wait', ms: PACE_MS }],
  // Paced as the checkpoints are, so the frames each way come at the same rate: on this VM a wake-up's cost depends on how long the process slept.
  round_trips: [{ op: 'wait', ms: PACE_MS }, answeredStep],
  streamed: [checkpoint],
  round_trips_concurrent: [answeredStep],
};

/** The phases session `i` of a pass runs: the first one runs every phase, the others only those run by every session. */
function phasesOf(i: number): Phase[] {
  return phases.filter((p) => i === 0 || !alone.has(p));
}

/** The hold session `i` comes to after `phase`. */
function nextHold(i: number, phase: Phase): string {
  const own = phasesOf(i);
  return own[own.indexOf(phase) + 1] ?? 'end';
}

/** The measured turn of session `i`: a hold before each of its phases (named after it), `frames` frames in each, a hold before the end. */
function framesTurn(i: number, frames: number): Step[] {
  return [...phasesOf(i).flatMap((p): Step[] => [holdStep(p), { op: 'repeat', times: frames, steps: phaseSteps[p] }]), holdStep('end')];
}

/** The typical turn; its first action is a hold: where a bridged session moves. */
const typicalTurn: Step[] = [
  holdStep('first'),
  { op: 'repeat', times: TYPICAL_CHECKPOINTS_EACH, steps: [checkpoint] },
  { op: 'repeat', times: TYPICAL_ACTIONS - 1, steps: [answeredStep, { op: 'repeat', times: TYPICAL_CHECKPOINTS_EACH, steps: [checkpoint] }] },
];

interface Stage {
  urls: string[];
  gateways: readonly GatewayChild[];
  meters: PhaseMeters;
}

/** Opens `count` sessions (session i's turn: `steps(i)`) on the holder, each at its first hold, and moves them to the other replica for `bridged`. Closes them all if one fails. */
async function openSessions(stage: Stage, path: Path, prefix: string, count: number, steps: (i: number) => Step[]): Promise<{ sessions: FrameSession[]; retries: number }> {
  const sessions = Array.from({ length: count }, (_, i) => new FrameSession(`${prefix}${i}`));
  const opened = await Promise.allSettled(
    sessions.map(async (s, i) => {
      await s.start(stage.urls[HOLDER] as string, steps(i), PHASE_TIMEOUT_MS);
      return path === 'bridged' ? s.moveTo(stage.urls[SOCKET_REPLICA] as string, PHASE_TIMEOUT_MS) : 0;
    }),
  );
  const failed = opened.find((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failed) {
    for (const s of sessions) s.close();
    throw failed.reason;
  }
  return { sessions, retries: opened.reduce((n, o) => n + (o.status === 'fulfilled' ? o.value : 0), 0) };
}

/** Waits for every session's close (1000: the turn ended) and for both replicas to have given every run back (its lock released after the close). */
async function endSessions(stage: Stage, sessions: readonly FrameSession[]): Promise<void> {
  const codes = await Promise.all(sessions.map((s) => s.ended(PHASE_TIMEOUT_MS)));
  const bad = codes.map((code, i) => ({ code, id: sessions[i]?.workflowId })).filter((c) => c.code !== 1000);
  if (bad.length > 0) throw new Error(`sessions did not end 1000: ${JSON.stringify(bad.slice(0, 4))}`);
  await waitUntil(async () => (await Promise.all(stage.gateways.map((g) => g.runsInFlight()))).every((n) => n === 0), PHASE_TIMEOUT_MS, 'every run to end');
}

type PassReadings = Record<Phase, Reading>;

/** One pass of the measured turn on `path`: a reading per phase; with `idleMs`, an idle reading first, the sessions held. */
async function framesPass(
  stage: Stage,
  path: Path,
  prefix: string,
  framesPerSession: number,
  idleMs = 0,
): Promise<{ readings: PassReadings; idle: Reading | undefined; retries: number }> {
  const { sessions, retries } = await openSessions(stage, path, prefix, SESSIONS, (i) => framesTurn(i, framesPerSession));
  const client = (): FrameCounts => clientCounts(sessions);
  try {
    const idle = idleMs > 0 ? await stage.meters.around(client, () => sleep(idleMs)) : undefined;
    const readings: Partial<PassReadings> = {};
    for (const phase of phases) {
      const released = sessions.filter((s) => s.heldAt() === phase);
      if (released.length !== (alone.has(phase) ? 1 : SESSIONS)) throw new Error(`${path} ${phase}: ${released.length} sessions at its hold`);
      const reading = await stage.meters.around(client, async () => {
        for (const s of released) s.release(phase);
        await Promise.all(released.map((s) => s.hold(nextHold(sessions.indexOf(s), phase), PHASE_TIMEOUT_MS)));
      });
      const checkpoints = phaseSteps[phase].includes(checkpoint) ? framesPerSession * released.length : 0;
      if (reading.client.checkpointsIn !== checkpoints) throw new Error(`${path} ${phase}: ${reading.client.checkpointsIn} checkpoints delivered, ${checkpoints} sent`);
      readings[phase] = reading;
    }
    for (const s of sessions) s.release('end');
    await endSessions(stage, sessions);
    return { readings: readings as PassReadings, idle, retries };
  } finally {
    for (const s of sessions) s.close();
  }
}

/** TYPICAL_SESSIONS sessions of the typical turn on `path`, SESSIONS at a time, from the first connect to every run given back. */
async function typicalPass(stage: Stage, path: Path): Promise<{ reading: Reading; sessions: number; sockets: number }> {
  const sessions: FrameSession[] = [];
  const reading = await stage.meters.around(
    () => clientCounts(sessions),
    async () => {
      for (let batch = 0; sessions.length < TYPICAL_SESSIONS; batch++) {
        const opened = (await openSessions(stage, path, `${PREFIX}typical-${path}-${batch}-`, SESSIONS, () => typicalTurn)).sessions;
        sessions.push(...opened);
        try {
          for (const s of opened) s.release('first');
          await endSessions(stage, opened);
        } finally {
          for (const s of opened) s.close();
        }
      }
    },
  );
  return { reading, sessions: sessions.length, sockets: sessions.reduce((n, s) => n + s.socketCount, 0) };
}

/** CPU ms per unit by role: the replica holding the run, the bridged socket's replica (bridged only), Redis. */
function cpuPer(r: Reading, units: number, path: Path): Record<string, number | null> {
  const out: Record<string, number | null> = { gateway_holder: round((r.cpuMs[`gateway_${HOLDER}`] ?? Number.NaN) / units, 4) };
  if (path === 'bridged') out['gateway_socket'] = round((r.cpuMs[`gateway_${SOCKET_REPLICA}`] ?? Number.NaN) / units, 4);
  out['redis'] = round(r.redisCpuMs / units, 4);
  return out;
}

const isRoundTrip = (phase: Phase): boolean => phaseSteps[phase].includes(answeredStep);

/** What a phase's costs are divided by: the frames the client got in a one-way phase, the answers it sent (round trips) in round trips. */
function unitsOf(phase: Phase, r: Reading): number {
  return isRoundTrip(phase) ? r.client.framesOut : r.client.framesIn;
}

/** a − b per key (a round trip less its frame to the client: the frame to the service). */
function minus(a: Record<string, number | null>, b: Record<string, number | null>): Record<string, number | null> {
  return Object.fromEntries(Object.entries(a).map(([k, v]) => [k, v === null || b[k] === null || b[k] === undefined ? null : round(v - b[k], 4)]));
}

function perEach(counts: Record<string, number>, units: number): Record<string, number | null> {
  return Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, round(v / units, 3)]));
}

/** A reading's raw sums, for the JSON. */
function raw(r: Reading): Record<string, unknown> {
  return {
    frames_to_client: r.client.framesIn,
    frames_to_service: r.client.framesOut,
    elapsed_ms: Math.round(r.elapsedMs),
    cpu_ms: r.cpuMs,
    redis_cpu_ms: round(r.redisCpuMs, 1),
    redis_commands: total(r.redisCommands),
    redis_bytes_in: r.redisBytesIn,
    redis_bytes_out: r.redisBytesOut,
    client: r.client,
  };
}

export const wsFrames: Scenario = {
  name: 'ws_frames',
  sizes: `frames per phase and path over ${ROUNDS} passes of ${SESSIONS} sessions (streamed checkpoints, concurrent round trips; 1/${SESSIONS} of that in the phases of one session alone: paced checkpoints, round trips)`,
  defaultRuns: 8_000,
  // Two gateways and five processes, then half a minute of passes on two cores.
  onlyWhenNamed: true,
  async run(ctx): Promise<ScenarioOutcome> {
    const frames = ctx.options.runs ?? this.defaultRuns;
    const framesPerSession = Math.max(1, Math.ceil(frames / (SESSIONS * ROUNDS)));
    const { redis } = ctx.env;
    const stack = await startBenchStack(ctx.env, { replicas: ['frames-0', 'frames-1'] });
    const gateways = stack.replicas;
    try {
      await stack.owner.query('configure', { workflowId: WEBSOCKET_PREAUTH, config: { lockConcurrentFlow: true, actorId: ACTOR } });
      // Redis is metered apart (PhaseMeters: INFO cpu).
      const pids = Object.fromEntries(Object.entries(stack.pids()).filter(([name]) => name !== 'redis'));
      const stage: Stage = { urls: gateways.map((g) => g.url), gateways, meters: new PhaseMeters(redis, pids) };
      ctx.log(`2 gateways (${gatewayMainJs}); ${ROUNDS} passes per path of ${SESSIONS} sessions × ${framesPerSession} frames per phase`);

      // Warm-up, not measured: compiled code, connections and pools on both replicas, the bridge included.
      for (const path of paths) await framesPass(stage, path, `${PREFIX}warm-${path}-`, WARM_FRAMES_PER_SESSION);

      const empty = (): PassReadings => Object.fromEntries(phases.map((p) => [p, emptyReading])) as PassReadings;
      const sums: Record<Path, PassReadings> = { direct: empty(), bridged: empty() };
      /** Each pass's figures, per phase: the spread the sums hide. */
      const perPass: Record<Path, Array<Record<Phase, Record<string, number | null>>>> = { direct: [], bridged: [] };
      let idle: Reading | undefined;
      let retries = 0;
      const passesStarted = performance.now();
      for (let i = 0; i < ROUNDS; i++) {
        // Alternated, so drift in the machine's load falls on both paths alike.
        for (const path of i % 2 === 0 ? paths : [...paths].reverse()) {
          if (performance.now() - passesStarted > PASSES_BUDGET_MS) continue;
          const pass = await framesPass(stage, path, `${PREFIX}${path}-${i}-`, framesPerSession, path === 'bridged' && !idle ? IDLE_MS : 0);
          idle ??= pass.idle;
          retries += pass.retries;
          for (const phase of phases) sums[path][phase] = addReadings(sums[path][phase], pass.readings[phase]);
          perPass[path].push(
            Object.fromEntries(phases.map((p) => [p, cpuPer(pass.readings[p], unitsOf(p, pass.readings[p]), path)])) as Record<Phase, Record<string, number | null>>,
          );
          ctx.log(
            `${path} pass ${i + 1}: ${phases.map((p) => `${p} ${Math.round(pass.readings[p].elapsedMs)} ms (gateway CPU ${pass.readings[p].cpuMs['gateway_0']} + ${pass.readings[p].cpuMs['gateway_1']} ms)`).join(', ')}`,
          );
        }
      }
      const typical = { direct: await typicalPass(stage, 'direct'), bridged: await typicalPass(stage, 'bridged') };

      const calls = await stack.workflow.query('answers', { prefix: PREFIX });
      const protocolErrors = calls.flatMap((c) => c.protocolErrors.map((e) => `${c.workflowId}: ${e}`));
      if (protocolErrors.length > 0) throw new Error(`the service saw protocol errors: ${protocolErrors.slice(0, 3).join('; ')}`);

      const figuresOf = (path: Path): Record<string, unknown> => {
        const { paced, streamed, round_trips: trips, round_trips_concurrent: tripsConcurrent } = sums[path];
        const toClient = cpuPer(paced, unitsOf('paced', paced), path);
        const roundTrip = cpuPer(trips, unitsOf('round_trips', trips), path);
        return {
          [`${path}_cpu_ms_per_frame_to_client`]: toClient,
          [`${path}_cpu_ms_per_frame_to_client_streamed`]: cpuPer(streamed, unitsOf('streamed', streamed), path),
          [`${path}_cpu_ms_per_round_trip_concurrent`]: cpuPer(tripsConcurrent, unitsOf('round_trips_concurrent', tripsConcurrent), path),
          [`${path}_cpu_ms_per_round_trip`]: roundTrip,
          [`${path}_cpu_ms_per_frame_to_service`]: minus(roundTrip, toClient),
        };
      };
      const bytesOf = (path: Path): Record<string, number | null> => {
        const { paced, round_trips: trips } = sums[path];
        return {
          to_client_payload: round(paced.client.payloadIn / paced.client.framesIn, 1),
          to_client_wire: round(paced.client.wireIn / paced.client.framesIn, 1),
          to_service_payload: round(trips.client.payloadOut / trips.client.framesOut, 1),
          to_service_wire: round(trips.client.wireOut / trips.client.framesOut, 1),
          redis_in_per_frame_to_client: round(paced.redisBytesIn / paced.client.framesIn, 1),
          redis_out_per_frame_to_client: round(paced.redisBytesOut / paced.client.framesIn, 1),
          redis_in_per_round_trip: round(trips.redisBytesIn / trips.client.framesOut, 1),
          redis_out_per_round_trip: round(trips.redisBytesOut / trips.client.framesOut, 1),
        };
      };
      const sessionOf = (path: Path): Record<string, number | null> => {
        const { reading, sessions, sockets } = typical[path];
        const per = (n: number): number | null => round(n / sessions, 0);
        return {
          client_wire_in: per(reading.client.wireIn),
          client_wire_out: per(reading.client.wireOut),
          client_payload_in: per(reading.client.payloadIn),
          client_payload_out: per(reading.client.payloadOut),
          sockets: round(sockets / sessions, 1),
          redis_in: per(reading.redisBytesIn),
          redis_out: per(reading.redisBytesOut),
          redis_commands: round(clientSent(reading.redisCommands) / sessions, 1),
          redis_commands_incl_script_calls: round(total(reading.redisCommands) / sessions, 1),
        };
      };
      const inScripts = scriptCommands(gatewayMainJs, ['coordination', 'bridge']);
      /** Commands as the gateways sent them: an EVALSHA once, not the commands its script ran. */
      const clientSent = (counts: Record<string, number>): number => total(Object.fromEntries(Object.entries(counts).filter(([name]) => !inScripts.has(name))));
      const idleS = (idle?.elapsedMs ?? Number.NaN) / 1_000;
      const direct = figuresOf('direct');
      const bridged = figuresOf('bridged');
      const figures: Record<string, unknown> = {
        sessions_per_pass: SESSIONS,
        passes: { direct: perPass.direct.length, bridged: perPass.bridged.length },
        frames_per_session_per_phase: framesPerSession,
        pace_ms: PACE_MS,
        checkpoint_text_bytes: CHECKPOINT_TEXT_BYTES,
        holder: `gateway_${HOLDER}`,
        socket_replica_bridged: `gateway_${SOCKET_REPLICA}`,
        ...direct,
        ...bridged,
        bytes_per_frame: { direct: bytesOf('direct'), bridged: bytesOf('bridged') },
        redis_commands_per_frame_to_client: Object.fromEntries(paths.map((p) => [p, round(clientSent(sums[p].paced.redisCommands) / sums[p].paced.client.framesIn, 3)])),
        redis_commands_per_round_trip: Object.fromEntries(paths.map((p) => [p, round(clientSent(sums[p].round_trips.redisCommands) / sums[p].round_trips.client.framesOut, 3)])),
        redis_commands_incl_script_calls_per_frame_to_client: Object.fromEntries(
          paths.map((p) => [p, round(total(sums[p].paced.redisCommands) / sums[p].paced.client.framesIn, 3)]),
        ),
        redis_commands_incl_script_calls_per_round_trip: Object.fromEntries(
          paths.map((p) => [p, round(total(sums[p].round_trips.redisCommands) / sums[p].round_trips.client.framesOut, 3)]),
        ),
        redis_commands_by_name_per_frame_to_client: Object.fromEntries(paths.map((p) => [p, perEach(sums[p].paced.redisCommands, sums[p].paced.client.framesIn)])),
        redis_commands_by_name_per_round_trip: Object.fromEntries(paths.map((p) => [p, perEach(sums[p].round_trips.redisCommands, sums[p].round_trips.client.framesOut)])),
        // How many frames share a wake-up on the bridged path (a round trip is two frames): a round trip less a paced frame is like for like when both are about one.
        bridged_frames_per_bridge_read: Object.fromEntries(
          phases.map((ph) => [ph, round(((isRoundTrip(ph) ? 2 : 1) * unitsOf(ph, sums.bridged[ph])) / (sums.bridged[ph].redisCommands['xread'] ?? Number.NaN), 2)]),
        ),
        bytes_per_session: {
          turn: {
            client_actions: TYPICAL_ACTIONS,
            checkpoints: TYPICAL_ACTIONS * TYPICAL_CHECKPOINTS_EACH,
            checkpoint_text_bytes: CHECKPOINT_TEXT_BYTES,
            sessions: typical.direct.sessions,
          },
          direct: sessionOf('direct'),
          bridged: sessionOf('bridged'),
        },
        cpu_ms_per_session: Object.fromEntries(paths.map((p) => [p, cpuPer(typical[p].reading, typical[p].sessions, p)])),
        idle_cpu_ms_per_s: idle ? { ...perEach(idle.cpuMs, idleS), redis: round(idle.redisCpuMs / idleS, 2) } : null,
        idle_redis_commands_per_s: idle ? round(clientSent(idle.redisCommands) / idleS, 1) : null,
        reattach_retries_after_1013: retries,
        per_pass_cpu_ms_per_unit: perPass,
        phases: Object.fromEntries(paths.map((p) => [p, Object.fromEntries(phases.map((ph) => [ph, raw(sums[p][ph])]))])),
        typical: Object.fromEntries(paths.map((p) => [p, raw(typical[p].reading)])),
        gateway: gatewayMainJs,
      };
      ctx.log(`direct ${JSON.stringify(direct)}`);
      ctx.log(`bridged ${JSON.stringify(bridged)}`);
      ctx.log(
        `bytes per frame ${JSON.stringify(figures['bytes_per_frame'])}; per session ${JSON.stringify(figures['bytes_per_session'])}; idle ${JSON.stringify(figures['idle_cpu_ms_per_s'])}`,
      );

      const ms = (v: number | null | undefined): string => (v === null || v === undefined ? 'n/a' : `${v.toFixed(3)} ms`);
      const d = direct['direct_cpu_ms_per_frame_to_client'] as Record<string, number | null>;
      const b = bridged['bridged_cpu_ms_per_frame_to_client'] as Record<string, number | null>;
      const dIn = direct['direct_cpu_ms_per_frame_to_service'] as Record<string, number | null>;
      const bIn = bridged['bridged_cpu_ms_per_frame_to_service'] as Record<string, number | null>;
      const bridgedGateways = (b['gateway_holder'] ?? Number.NaN) + (b['gateway_socket'] ?? Number.NaN);
      const s = figures['bytes_per_session'] as Record<Path, Record<string, number | null>>;
      return {
        figures,
        row: {
          longrun:
            `bridged, gateway CPU per frame to client ${ms(b['gateway_holder'])} holder + ${ms(b['gateway_socket'])} socket, Redis ${ms(b['redis'])}; ` +
            `to service ${ms(bIn['gateway_holder'])} + ${ms(bIn['gateway_socket'])}; session ${s.bridged['client_wire_in']} B in / ${s.bridged['client_wire_out']} B out, Redis ${s.bridged['redis_in']} / ${s.bridged['redis_out']} B`,
          baseline: `direct: to client ${ms(d['gateway_holder'])}, to service ${ms(dIn['gateway_holder'])}; session ${s.direct['client_wire_in']} / ${s.direct['client_wire_out']} B, Redis ${s.direct['redis_in']} / ${s.direct['redis_out']} B`,
          ratio: d['gateway_holder'] ? `${(bridgedGateways / d['gateway_holder']).toFixed(2)}x gateway CPU per frame to client` : 'n/a',
          target: '—',
          met: null,
        },
      };
    } finally {
      await stack.close();
    }
  },
};
