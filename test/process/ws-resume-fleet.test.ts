/**
 * Sessions that outlive their connection, under faults (docs/spec.md §12, issue [17] "Proven
 * under faults"): 32 WebSocket sessions, each one turn of many steps whose every step
 * relays a write to the owner and asks the client to read a file, driven by longrun/client's
 * LongrunSession through three gateway replicas (child processes, `node dist/src/main.js`)
 * on one redis-server, while
 *
 *   - every client kills its socket (no close frame: 1006 on the gateway, the run parks)
 *     every 1.5–4 s and reconnects to a random replica (BRIDGED; else to the one holding
 *     its run),
 *   - BRIDGED only: replica C, which never starts a run (first connections go to A and B),
 *     holds only bridged sockets and drains (SIGTERM): its clients get 1012, no resume,
 *   - holder A drains (SIGTERM): its runs stop with WORKHORSE_SERVER_SHUTDOWN, one resume each,
 *   - the Redis restarts empty: every lock and run record is gone; the store fence refuses
 *     new starts for a lease TTL while every holder takes its lock back: no resume (issue [24]),
 *   - holder B is SIGKILLed: its runs' calls are cut, one resume each once the lease expired;
 *
 * each replica drained or killed comes back on the same port. No fault is fenced off: the
 * clients reconnect to any replica all through, the Redis restart included, and a client
 * answers each action it is sent once — an action the gateway sent it again after its answer
 * reached a replica is a failure, not answered again. (Only an answer on a connection the
 * gateway's side lost — a replica SIGKILLed with the answer unforwarded, a bridge broken —
 * may have died with it: that one is answered again, never executed again.) Asserted, as the workflow simulator saw
 * it: every action for the client answered exactly once per call (the simulator fails a call
 * on a second answer or a wrong one); per workflow, one startRequest plus one per fault that
 * cut its call (each extra call explained by a drain or death of its holder); no step
 * repeated but the one a fault cut, never after a dropped connection, a socket-only drain or
 * a Redis restart; no action sent to a client again once answered; the calls of a workflow
 * never overlap; every turn finishes; nothing left in Redis but the store marker. A run's turn
 * resumes where its last checkpoint left it (the simulator's `turn`, as the real service keeps
 * checkpoints).
 *
 * Everything seen is written to test-results/ws-resume-fleet.json (or WS_RESUME_FLEET_DUMP),
 * replica logs included, for looking into a failure.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import WebSocket from 'ws';
import { LongrunSession, type SessionAction, type SessionClose, type SessionEvent } from '@longrun/client';
import { WEBSOCKET_PREAUTH, type OwnerServiceSimulator } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import type { WorkflowServiceSimulator, CallRecord } from '../../sandbox/workflow-sim';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';
import { lockOperations } from '../../stack/metric-text';
import { freePort } from '../../stack/ports';
import type { RedisServer } from '../../stack/redis-server';

/**
 * Reconnects go to a random replica, and the socket-only drain runs (the bridge of spec §12
 * "Any replica", src/websocket/bridge/). False: reconnects go to the replica holding the run, as
 * they had to before the bridge (a reconnect elsewhere was refused 1013 while the run was
 * parked), and there is no socket-only replica to drain.
 */
const BRIDGED = true;
/**
 * Whether a client drops a connection before it has heard anything on it. Today a
 * connection lost while its run is being started (the lock taken, the stream not yet
 * open: the session is still `starting`) is not parked: Launcher.send sees the aborted
 * signal and waits for the run to end, the run goes on with no connection until its first
 * client-bound action finds the sink gone, and the call is cancelled (client_gone) — the
 * service saw a start, so the reconnect starts a second call, a resume no fault explains.
 * So clients drop only connections that delivered a frame (the run is attached). Set to
 * true once a run lost while starting is parked like any other.
 */
const DROP_WHILE_STARTING = true;
/**
 * Whether a client drops its socket the moment its drop timer fires (true), or only at its
 * next frame, when nothing else is on its way to it: a read (the service awaits its answer;
 * the client is executing it when the socket dies) or a checkpoint (the next frame comes a
 * step later, into the backlog). False is what a gateway before e4acc4a needs (a frame
 * that reached a connection whose loss was being noticed ended the run client_gone instead
 * of parking it), to measure one with LONGRUN_TEST_GATEWAY_MAIN.
 */
const DROP_ANY_TIME = true;
/**
 * How long a replica is out of the clients' rotation before its SIGTERM (a load balancer's
 * deregistration delay). Today a connection that reaches a replica just as it drains is
 * closed 1001 `server shutdown` (it had no run yet) while its startRequest is on the way;
 * the start is still served — re-attached, or bridged to its holder — and the client's
 * echo of that close frame is then taken for the client's own close 1001: the run is
 * stopped with WORKHORSE_WEBSOCKET_CLOSE_1001 (not even an infrastructure reason) and the
 * reconnect starts it again. Set to 0 once a session ignores what comes after its own close.
 */
const UNROUTE_BEFORE_DRAIN_MS = 0;

/**
 * How long after handing an answer to its socket a client waits before dropping that socket.
 * The drop is a reset (terminate() with data unread on the client's side), and a reset makes
 * the gateway's kernel discard what the gateway has not read yet: an answer counts as having
 * reached the gateway only once its event loop had time to read it. 20 ms was not enough on a
 * loaded two-core machine (an answer lost that way, then replayed, read as a resend).
 */
const ANSWER_FLUSH_MS = 250;
const SESSIONS = 32;
const STEPS = 80;
const STEP_MS = 250;
/** Each client drops its socket after a random time in this range, again and again. */
const DROP_MIN_MS = 1_500;
const DROP_MAX_MS = 4_000;
/** How long the client "executes" a read before answering (an action may be replayed meanwhile). */
const EXECUTE_MAX_MS = 80;
/** Time between two faults: long enough for each fault's resumes to settle. */
const FAULT_GAP_MS = 3_500;
const LEASE_TTL_MS = 3_000;
const RESUME_WINDOW_MS = 20_000;
const ACTOR = 'user-1';

const SHUTDOWN = 'WORKHORSE_SERVER_SHUTDOWN';
/** What a lost lease sends to the public service (its allowlist has no WORKHORSE_LOCK_LOST): told apart from a drain by when it ended. */
const LOCK_LOST = SHUTDOWN;

interface Slot {
  name: string;
  port: number;
  replica: Replica | undefined;
  /** Offered to clients: false from just before a drain or kill until its replacement is ready. */
  up: boolean;
}

/** A fault, and the calls it ended: each extra call of a workflow is explained by one of these. */
interface Fault {
  name: string;
  at: number;
  /** Workflows whose run the replica held (its /runs) just before the fault; all, for Redis. */
  held: Set<string> | 'all';
  ended: (call: CallRecord) => boolean;
}

/** One workflow's client: its LongrunSession (a second one after a 1000 close it did not ask for), and what it saw. */
interface Client {
  id: string;
  /** Where its run is held (holder-only mode): where its connections go. */
  holder: Slot;
  connects: number;
  /** Connections per replica. */
  targets: Record<string, number>;
  drops: number;
  /** Actions handed over again (same requestID and file) after a reconnect. */
  replays: number;
  /**
   * Actions sent again after their answer had reached a replica (sent on an earlier
   * connection, flushed before that connection was dropped): never answered again, and a
   * failure — the gateway lost an answer it had, and a client that executes what it is sent
   * would run the action twice.
   */
  resent: number;
  /** When the client last handed an answer to its socket (a drop waits until it is surely flushed). */
  lastSentAt: number;
  /** Files read, in order (a read is executed again only when a new call asks for it again). */
  executed: string[];
  /** Per action (requestID and file, which names its call): being read, or answered on this connection (undefined: could not be sent). */
  actions: Map<string, { state: 'executing' } | { state: 'answered'; on: WebSocket | undefined }>;
  /** Replays of an action already answered on the connection they came on: the answer and the replay crossed. */
  crossed: number;
  /**
   * Actions sent again after an answer that went on a connection the gateway's side lost
   * (its replica SIGKILLed, a bridge broken: 1006 not of the client's making, 1012 "the run
   * is unreachable"): the answer may have died with it, so it is answered again (never
   * executed again), as a client that keeps its answers does.
   */
  reanswered: number;
  /** How each connection ended: dropped by the client itself (after its answers were flushed), or closed with a code. */
  ends: Map<WebSocket, 'dropped' | number>;
  /** The step numbers of the checkpoints seen, in order. */
  checkpoints: number[];
  events: Array<SessionEvent & { at: number }>;
  closes: Array<SessionClose & { at: number }>;
  session: LongrunSession | undefined;
  /** The last connection a frame came on. */
  heardOn: WebSocket | undefined;
  /** What the client did, for the dump: actions in (`in <requestID> <file> <state>`), answers out (`out <requestID> <sent>`). */
  trace: Array<[number, string]>;
  lastAnswered: boolean;
  dropTimer: NodeJS.Timeout | undefined;
  /** The drop timer fired: drop at the next frame (DROP_ANY_TIME false). */
  dropArmed: boolean;
  done: Promise<void>;
  finish: () => void;
  failure: string | undefined;
}

let stack: Stack<'process'>;
let redis: RedisServer;
let redisClient: Redis;
let owner: OwnerServiceSimulator;
let workflow: WorkflowServiceSimulator;
const slots: Slot[] = [];
const retired: Replica[] = [];
const clients: Client[] = [];

async function startSlot(slot: Slot): Promise<void> {
  // The port was the previous replica's a moment ago: retry briefly should it not be free yet.
  for (let attempt = 1; ; attempt++) {
    try {
      slot.replica = await stack.startReplica({ name: slot.name, port: slot.port });
      slot.up = true;
      return;
    } catch (err) {
      if (attempt >= 3) throw err;
      await sleep(200);
    }
  }
}

const wsUrl = (slot: Slot): string => `ws://127.0.0.1:${slot.port}/api/v4/ai/duo_workflows/ws`;
const pick = <T>(items: T[]): T => items[Math.floor(Math.random() * items.length)] as T;
const upSlots = (): Slot[] => {
  const up = slots.filter((s) => s.up);
  return up.length > 0 ? up : slots;
};

const stepOf = (text: string): number => Number(/step-(\d+)\.txt$/.exec(text)?.[1] ?? /^step (\d+)\//.exec(text)?.[1] ?? NaN);

function scenario(id: string): Step[] {
  return [
    {
      op: 'turn',
      checkpoints: STEPS,
      intervalMs: STEP_MS,
      write: { method: 'POST', path: `/api/v4/echo?workflow=${id}` },
      // {call}: a step a later call asks for again is another action than the one it cut.
      client: { action: { runReadFile: { filepath: `${id}/call-{call}/step-{step}.txt` } }, expect: { plainTextResponse: { response: `read ${id}/call-{call}/step-{step}.txt` } } },
    },
    { op: 'end' },
  ];
}

const startOf = (id: string) => ({ workflowID: id, goal: `the turn of ${id}`, workflowMetadata: scenarioMetadata(scenario(id)) });

const callsOf = (id: string): CallRecord[] => [...workflow.callsFor(id)].sort((x, y) => x.startedAt - y.startedAt);
const turnDone = (id: string): boolean => (workflow.progress.get(`${id}/turn`) ?? 0) >= STEPS;

function newClient(i: number): Client {
  const id = String(81_000 + i);
  let finish = (): void => undefined;
  const done = new Promise<void>((resolve) => (finish = resolve));
  // First connections go to A and B only: C holds nothing but bridged sockets (BRIDGED).
  const c: Client = {
    id,
    holder: slots[i % 2] as Slot,
    connects: 0,
    targets: {},
    drops: 0,
    replays: 0,
    resent: 0,
    lastSentAt: 0,
    crossed: 0,
    reanswered: 0,
    ends: new Map(),
    executed: [],
    actions: new Map(),
    checkpoints: [],
    events: [],
    closes: [],
    session: undefined,
    heardOn: undefined,
    trace: [],
    lastAnswered: false,
    dropTimer: undefined,
    dropArmed: false,
    done,
    finish,
    failure: undefined,
  };
  return c;
}

/** The URL of this connection attempt: a session's first connection goes to its holder; a reconnect to a random replica (BRIDGED) or the holder. */
function nextUrl(c: Client, first: boolean): string {
  let slot: Slot;
  if (first && c.connects === 0) slot = c.holder;
  else if (BRIDGED) slot = pick(upSlots());
  else {
    // The holder is gone (drained, killed): the run resumes where the reconnect lands, which holds it from then on.
    if (!c.holder.up) c.holder = pick(upSlots());
    slot = c.holder;
  }
  c.connects += 1;
  c.targets[slot.name] = (c.targets[slot.name] ?? 0) + 1;
  return wsUrl(slot);
}

function onAction(c: Client, action: SessionAction, session: LongrunSession): void {
  c.heardOn = session.socket;
  const requestID = action.requestID ?? '';
  const filepath = (action['runReadFile'] as { filepath?: string } | undefined)?.filepath;
  if (filepath === undefined) {
    c.failure ??= `unexpected action ${JSON.stringify(action)}`;
    return;
  }
  // The simulator numbers each call's requests from 1: a requestID with its file names one action.
  const key = `${requestID} ${filepath}`;
  const answer = (): void => {
    if (stepOf(filepath) === STEPS) c.lastAnswered = true;
    // false between connections: the gateway replays the action after the reconnect, and it is answered then.
    const sent = session.answer(requestID, { plainTextResponse: { response: `read ${filepath}` } });
    if (sent) c.lastSentAt = Date.now();
    c.actions.set(key, { state: 'answered', on: sent ? session.socket : undefined });
    c.trace.push([Date.now(), `out ${requestID} ${sent}`]);
  };
  const known = c.actions.get(key);
  c.trace.push([Date.now(), `in ${key} ${known?.state ?? 'new'}`]);
  if (known !== undefined) c.replays += 1;
  // Still being read: answered once, when done, on the connection current then.
  if (known?.state === 'executing') return;
  if (known?.state === 'answered') {
    // Never sent (no connection then): this replay is its first answer's chance.
    if (known.on === undefined) {
      answer();
      return;
    }
    // Answered on this very connection, after the re-attach's replay was sent: they crossed.
    if (known.on === session.socket) {
      c.crossed += 1;
      return;
    }
    // Answered on an earlier connection that the gateway's side lost: the answer may have died with it.
    const end = c.ends.get(known.on);
    if (end !== 'dropped' && end !== 1000 && end !== 1001 && end !== 1012) {
      c.reanswered += 1;
      answer();
      return;
    }
    // Answered, and the answer flushed, on a connection the client dropped or the gateway
    // closed cleanly (a socket-only drain's 1012 included): the gateway had it.
    c.resent += 1;
    c.failure ??= `${key} sent again after its answer reached the gateway`;
    return;
  }
  c.actions.set(key, { state: 'executing' });
  c.executed.push(filepath);
  setTimeout(answer, Math.random() * EXECUTE_MAX_MS).unref();
  if (c.dropArmed) drop(c);
}

/** Kills the current socket without a close frame (1006 on the gateway: the run parks); the session reconnects. */
function drop(c: Client): void {
  c.dropArmed = false;
  // Not once the last read is answered: a run that ends while parked is not what this test is about.
  if (c.session?.closed !== false || c.lastAnswered) return;
  const ws = c.session.socket;
  if (ws?.readyState !== WebSocket.OPEN || !(DROP_WHILE_STARTING || ws === c.heardOn)) return;
  // A client that drops its own socket under an answer it just sent cannot know if it left:
  // drop once the gateway has surely read it (ANSWER_FLUSH_MS).
  if (ws.bufferedAmount > 0 || Date.now() - c.lastSentAt < ANSWER_FLUSH_MS) {
    setTimeout(() => drop(c), ANSWER_FLUSH_MS).unref();
    return;
  }
  ws.terminate();
  c.drops += 1;
  c.ends.set(ws, 'dropped');
  c.trace.push([Date.now(), 'drop']);
}

function scheduleDrop(c: Client): void {
  c.dropTimer = setTimeout(
    () => {
      if (c.session?.closed !== false) return;
      if (DROP_ANY_TIME) drop(c);
      else c.dropArmed = true;
      scheduleDrop(c);
    },
    DROP_MIN_MS + Math.random() * (DROP_MAX_MS - DROP_MIN_MS),
  );
}

async function openSession(c: Client, resume: boolean): Promise<void> {
  const session = new LongrunSession({
    url: () => nextUrl(c, !resume),
    reconnect: { initialDelayMs: 100, maxDelayMs: 1_000, maxAttempts: 60, windowMs: RESUME_WINDOW_MS },
    idleTimeoutMs: 5_000,
    onAction: (action, s) => onAction(c, action, s),
    onCheckpoint: (checkpoint) => {
      c.heardOn = session.socket;
      c.checkpoints.push(stepOf(checkpoint.checkpoint));
      if (c.dropArmed) drop(c);
    },
    onEvent: (event) => {
      c.events.push({ ...event, at: Date.now() });
      // Every connection's close, those LongrunSession does not report as a loss (a reconnect refused 1013) included.
      if (event.kind === 'open') {
        const ws = session.socket;
        ws?.once('close', (code: number, reason: Buffer) => {
          c.trace.push([Date.now(), `close ${code} ${reason.toString()}`]);
          if (!c.ends.has(ws)) c.ends.set(ws, code === 1012 && reason.toString() !== 'service restart' ? -1012 : code);
        });
      }
    },
    onClose: (close) => onClose(c, close),
  });
  c.session = session;
  const start = startOf(c.id);
  await session.start(resume ? LongrunSession.resumeStartOf(start) : start);
  scheduleDrop(c);
}

function onClose(c: Client, close: SessionClose): void {
  c.closes.push({ ...close, at: Date.now() });
  clearTimeout(c.dropTimer);
  if (!(close.how === 'closed' && close.code === 1000) || !turnDone(c.id))
    c.failure ??= `ended ${JSON.stringify(close)} with the turn at ${workflow.progress.get(`${c.id}/turn`) ?? 0}/${STEPS}`;
  c.finish();
}

async function heldBy(slot: Slot): Promise<Set<string>> {
  const res = await request(`${(slot.replica as Replica).opsUrl}/runs`);
  const { runs } = (await res.body.json()) as { runs: Array<{ workflow_id: string }> };
  return new Set(runs.map((r) => r.workflow_id));
}

const running = (): number => clients.filter((c) => c.session?.closed === false && !turnDone(c.id)).length;

beforeAll(async () => {
  stack = await startStack({
    gateway: 'process',
    replicas: 0,
    redis: 'own',
    env: {
      LONGRUN_LOG_LEVEL: 'info',
      LONGRUN_LEASE_TTL_MS: String(LEASE_TTL_MS),
      LONGRUN_WS_PING_MS: '200',
      // Generous for a loaded 2-core machine; a pong missed only parks a run (the client comes back).
      LONGRUN_WS_PONG_TIMEOUT_MS: '1500',
      LONGRUN_WS_CLOSE_TIMEOUT_MS: '1000',
      LONGRUN_WS_RESUME_WINDOW_MS: String(RESUME_WINDOW_MS),
      LONGRUN_STOP_ACK_TIMEOUT_MS: '1000',
      LONGRUN_DRAIN_TIMEOUT_MS: '4000',
      LONGRUN_REDIS_CONNECT_TIMEOUT_MS: '500',
    },
  });
  ({ owner, workflow } = stack);
  redis = stack.redis as RedisServer;
  redisClient = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  redisClient.on('error', () => undefined);
  // One actor for every session (the WebSocket preauth is one answer): each re-attaches its own workflow.
  owner.configure(WEBSOCKET_PREAUTH, { lockConcurrentFlow: true, actorId: ACTOR });
  for (const name of ['fleet-a', 'fleet-b', 'fleet-c']) slots.push({ name, port: await freePort(), replica: undefined, up: false });
  await Promise.all(slots.map(startSlot));
  // startSlot's attempts fit in it: a hook that timed out would leave replicas starting behind it.
}, 60_000);

afterAll(async () => {
  for (const c of clients) {
    clearTimeout(c.dropTimer);
    c.session?.close();
  }
  redisClient?.disconnect();
  // Every replica the stack started, retired ones included, then its simulators and Redis.
  await stack?.close();
});

describe('WebSocket sessions across a fleet, under faults', () => {
  it(`${SESSIONS} sessions dropping their sockets every few seconds, through ${BRIDGED ? 'a socket-only drain, ' : ''}a holder drain, a Redis restart and a holder SIGKILL: every action answered once, one start per session plus one per holder fault, no step repeated otherwise, no overlap, nothing left in Redis`, async () => {
    const t0 = Date.now();
    const faults: Fault[] = [];
    const [a, b, c] = slots as [Slot, Slot, Slot];

    for (let i = 0; i < SESSIONS; i++) {
      const client = newClient(i);
      clients.push(client);
      await openSession(client, false);
      await sleep(40);
    }

    const drain = async (slot: Slot): Promise<void> => {
      const replica = slot.replica as Replica;
      slot.up = false;
      await sleep(UNROUTE_BEFORE_DRAIN_MS);
      replica.child.process.kill('SIGTERM');
      expect(await replica.child.exited(15_000), `${slot.name} drained`).toBe(0);
      retired.push(replica);
      await startSlot(slot);
    };

    const dump = (): void => {
      const out = process.env['WS_RESUME_FLEET_DUMP'] ?? 'test-results/ws-resume-fleet.json';
      mkdirSync(path.dirname(out), { recursive: true });
      writeFileSync(
        out,
        JSON.stringify(
          {
            t0,
            bridged: BRIDGED,
            faults: faults.map((f) => ({ name: f.name, at: f.at - t0, held: f.held === 'all' ? 'all' : [...f.held] })),
            clients: clients.map(({ session: _s, actions: _a, ends: _e, heardOn: _h, dropTimer: _d, done: _p, finish: _f, holder, ...rest }) => ({ ...rest, holder: holder.name })),
            calls: workflow.calls.map((call) => ({ ...call, startRequest: { goal: call.startRequest.goal }, metadata: undefined, actionResponses: call.actionResponses.length })),
            logs: Object.fromEntries(
              [...retired, ...slots.flatMap((s) => (s.replica ? [s.replica] : []))].map((r, i) => [`${r.name}#${i}`, `${r.child.stdout()}\n${r.child.stderr()}`]),
            ),
          },
          null,
          1,
        ),
      );
    };

    try {
      await sleep(FAULT_GAP_MS);

      // 1. BRIDGED: C holds only bridged sockets and drains: they are closed 1012, their runs stay where they are.
      if (BRIDGED) {
        const held = await heldBy(c);
        faults.push({ name: 'socket-only drain (SIGTERM replica C)', at: Date.now(), held, ended: (call) => call.stopReasons.includes(SHUTDOWN) && held.has(call.workflowId) });
        expect([...held], 'C holds no run').toEqual([]);
        await drain(c);
        await sleep(FAULT_GAP_MS);
      }

      // 2. A holder drains: its runs stop with WORKHORSE_SERVER_SHUTDOWN (one resume each), its clients get 1001.
      const heldByA = await heldBy(a);
      const drainedAt = Date.now();
      // Before the Redis restart: a lost lease sends the same word (LOCK_LOST).
      let restartedAt = Infinity;
      faults.push({
        name: 'holder drain (SIGTERM replica A)',
        at: drainedAt,
        held: heldByA,
        ended: (call) => call.stopReasons.includes(SHUTDOWN) && (call.ended?.at ?? 0) >= drainedAt && (call.ended?.at ?? 0) < restartedAt,
      });
      await drain(a);
      await sleep(FAULT_GAP_MS);

      // 3. The Redis restarts empty: every lock, run record and inbox is gone at once. The
      //    clients go on reconnecting anywhere; the store fence refuses new starts (1013) while
      //    every holder takes its lock back: no call ends.
      restartedAt = Date.now();
      let killedAt = Infinity;
      faults.push({
        name: 'Redis restart (empty)',
        at: restartedAt,
        held: 'all',
        ended: (call) => call.stopReasons.includes(LOCK_LOST) && (call.ended?.at ?? 0) >= restartedAt && (call.ended?.at ?? 0) < killedAt,
      });
      await redis.restart();
      await sleep(FAULT_GAP_MS);

      // 4. A holder dies: its calls are cut (no stop), and resume elsewhere once their leases expire.
      const stillRunning = running();
      const heldByB = await heldBy(b);
      killedAt = Date.now();
      faults.push({
        name: 'holder SIGKILL (replica B)',
        at: killedAt,
        held: heldByB,
        ended: (call) => call.ended?.how === 'cancelled' && call.stopReasons.length === 0 && call.ended.at >= killedAt && call.ended.at < killedAt + 5_000,
      });
      const killed = b.replica as Replica;
      b.up = false;
      await killed.child.kill();
      retired.push(killed);
      await startSlot(b);

      // Every session ends (bounded: a session left hanging is reported, not waited for).
      await Promise.race([Promise.all(clients.map((cl) => cl.done)), sleep(60_000)]);
      const unfinished = clients.filter((cl) => cl.session?.closed === false).map((cl) => cl.id);
      expect(unfinished, 'sessions still open 60 s after the last fault').toEqual([]);
      expect(clients.filter((cl) => cl.failure).map((cl) => `${cl.id}: ${cl.failure}`)).toEqual([]);
      expect(stillRunning, 'sessions still running at the last fault').toBeGreaterThanOrEqual(SESSIONS / 2);
      // No run left behind anywhere (a parked run nobody came back to would still hold its call).
      await workflow.waitFor(() => workflow.openCalls === 0, 10_000, 'every workflow-service call ended');

      const report: string[] = [];
      const explained = new Map<Fault, string[]>(faults.map((f) => [f, []]));
      for (const client of clients) {
        const { id } = client;
        const calls = callsOf(id);
        expect(calls.length, id).toBeGreaterThan(0);
        // One start with the turn's input, then only resume starts (no new input).
        expect(
          calls.map((call) => call.startRequest.goal),
          id,
        ).toEqual([`the turn of ${id}`, ...calls.slice(1).map(() => '')]);
        // Never two calls of one workflow at once.
        for (let i = 1; i < calls.length; i++)
          expect(calls[i]?.startedAt, `${id} call ${i} starts after call ${i - 1} ended`).toBeGreaterThanOrEqual(calls[i - 1]?.ended?.at ?? Infinity);
        // Every call but the last was ended by a fault that held it; the last finished the turn.
        for (const [i, call] of calls.entries()) {
          expect(call.protocolErrors, `${id} call ${i}`).toEqual([]);
          if (i === calls.length - 1) {
            expect(call, `${id}: the last call finished the turn`).toMatchObject({ ended: { how: 'ok' }, stopReasons: [], turn: { to: STEPS } });
            continue;
          }
          const by = faults.filter((f) => f.ended(call) && (f.held === 'all' || f.held.has(id)));
          expect(
            by.map((f) => f.name),
            `${id} call ${i} (ended ${JSON.stringify(call.ended && { ...call.ended, at: call.ended.at - t0 })}, stops ${JSON.stringify(call.stopReasons)}): one fault ended it`,
          ).toHaveLength(1);
          explained.get(by[0] as Fault)?.push(id);
        }
        // The turn goes on where the last call's last checkpoint left it: no step done twice...
        expect(calls[0]?.turn?.from, id).toBe(0);
        for (let i = 1; i < calls.length; i++) expect(calls[i]?.turn?.from, `${id} call ${i}`).toBe(calls[i - 1]?.turn?.to);
        // ...each read answered exactly once per call, for the steps it did and at most the one a fault cut.
        for (const [i, call] of calls.entries()) {
          const reads = call.actionResponses.filter((r) => r.kind === 'runReadFile');
          expect(new Set(reads.map((r) => r.requestID)).size, `${id} call ${i}: one answer per requestID`).toBe(reads.length);
          const steps = reads.map((r) => stepOf(r.response.plainTextResponse?.response ?? ''));
          const from = call.turn?.from ?? 0;
          const to = call.turn?.to ?? 0;
          const did = Array.from({ length: to - from }, (_, k) => from + 1 + k);
          expect([did, [...did, to + 1]], `${id} call ${i}: the reads answered`).toContainEqual(steps);
        }
        // The owner got each step's write once, but the step a fault cut (written again by the next call).
        const written = owner.apiRequests.filter((r) => r.path === `/api/v4/echo?workflow=${id}`).map((r) => (JSON.parse(r.body) as { step: number }).step);
        const again = calls.slice(1).map((call) => (call.turn?.from ?? 0) + 1);
        for (let step = 1; step <= STEPS; step++) {
          const times = written.filter((s) => s === step).length;
          expect(times, `${id}: writes of step ${step}`).toBeGreaterThanOrEqual(1);
          expect(times, `${id}: writes of step ${step}`).toBeLessThanOrEqual(1 + again.filter((s) => s === step).length);
        }
        // The client read each step's file once, but the one a new call asked for again.
        const executedSteps = client.executed.map(stepOf);
        for (const step of new Set(executedSteps)) {
          const times = executedSteps.filter((s) => s === step).length;
          expect(times, `${id}: reads of step ${step}`).toBeLessThanOrEqual(1 + again.filter((s) => s === step).length);
        }
        // No action was sent to the client again once its answer had reached a replica.
        expect(client.resent, `${id}: actions sent again after their answer`).toBe(0);
        // A checkpoint is never sent twice (not to a reconnect, not by a resumed call).
        expect(
          client.checkpoints.every((step, k) => k === 0 || step > (client.checkpoints[k - 1] as number)),
          `${id}: checkpoints seen ${JSON.stringify(client.checkpoints)}`,
        ).toBe(true);
      }

      // Each fault that holds runs hit some (a loaded machine shifts the faults, not what they hit).
      for (const fault of faults) {
        const hit = explained.get(fault) ?? [];
        report.push(`${fault.name} at ${fault.at - t0} ms: ${fault.held === 'all' ? '' : `${fault.held.size} runs held, `}${hit.length} calls ended and resumed`);
        // A socket-only drain and a Redis restart cost no resume; a holder's drain or death one per run.
        if (fault.name.startsWith('socket-only') || fault.name.startsWith('Redis')) expect(hit, fault.name).toEqual([]);
        else expect(hit.length, fault.name).toBeGreaterThanOrEqual(3);
      }
      // The sockets did drop, every few seconds each, and the runs were re-attached (else the calls above would not add up).
      expect(
        clients.reduce((n, cl) => n + cl.drops, 0),
        'sockets dropped',
      ).toBeGreaterThan(SESSIONS * 3);
      const lost = clients.flatMap((cl) => cl.events).filter((e): e is Extract<SessionEvent, { kind: 'lost' }> & { at: number } => e.kind === 'lost');
      if (BRIDGED) {
        const socketOnly = faults[0] as Fault;
        expect(
          lost.filter((e) => e.code === 1012 && e.at >= socketOnly.at && e.at < (faults[1] as Fault).at).length,
          'clients of the socket-only drain closed 1012',
        ).toBeGreaterThan(0);
      }

      // Nothing left in Redis but the store marker: no lock, run record, stop key, bridge or stream key (a killed replica's expire within a lease).
      await expect.poll(() => redisClient.keys('*'), { timeout: 15_000, interval: 250 }).toEqual(['longrun:store']);

      const sum = (f: (cl: Client) => number): number => clients.reduce((n, cl) => n + f(cl), 0);
      // What the Redis restart cost: the replicas up since before it (A's replacement and C) count it; B's first life is gone with it.
      const fenced = await lockOperations(
        slots.map((s) => s.replica as Replica),
        'fenced',
      );
      const reasserted = await lockOperations(
        slots.map((s) => s.replica as Replica),
        'reasserted',
      );
      const byCode = new Map<number, number>();
      for (const e of lost) byCode.set(e.code, (byCode.get(e.code) ?? 0) + 1);
      console.log(
        [
          `ws resume fleet (${BRIDGED ? 'reconnects to a random replica' : 'reconnects to the holder'}): ${SESSIONS} sessions of ${STEPS} steps in ${Date.now() - t0} ms; ${workflow.calls.length} workflow-service calls`,
          `sockets dropped ${sum((cl) => cl.drops)}, connections ${sum((cl) => cl.connects)}, losses seen by clients by code ${[...byCode].map(([code, n]) => `${code}: ${n}`).join(', ')}`,
          `actions replayed after a reconnect ${sum((cl) => cl.replays)} (crossing an answer sent on the same connection, not answered again: ${sum((cl) => cl.crossed)}; answered again after the gateway's side lost the connection the answer went on: ${sum((cl) => cl.reanswered)}; sent again after their answer reached a replica: ${sum((cl) => cl.resent)})`,
          `starts refused while the Redis restarted empty was fenced: ${fenced}; locks taken back by their holders: ${reasserted}`,
          ...report,
        ].join('\n'),
      );
    } finally {
      dump();
    }
  }, 170_000);
});
