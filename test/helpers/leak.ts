/**
 * What the leak tests read of a replica from outside (issue [26]), through its ops
 * listener's debug routes (mounted with --expose-gc: LEAK_NODE_ARGS, every replica's node
 * flags): its heap after full compacting collections, and how many entries each per-session,
 * per-link and per-run structure holds (/debug/structures, src/gateway-structures.ts; 0 once idle).
 */
import { mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { DEPLOYED_NODE_ARGS } from '../../stack/deployed-runtime';
import type { GatewayChild, HeapUsage } from '../../stack/gateway-child';

/** The debug routes, and the image's young-generation bound (so the heap compares with a deployed one). */
export const LEAK_NODE_ARGS: readonly string[] = ['--expose-gc', ...DEPLOYED_NODE_ARGS];

/** What /debug/structures answers. */
export interface Structures {
  held: Record<string, number>;
  pooled: Record<string, number>;
}

/** A replica's heap after collections, in MB: all of it, and what V8's compiled code and bytecode take of it. */
export interface Heap {
  mb: number;
  /** V8's code and trusted spaces: they grow as more of the program gets hot, up to what the program is — not per session. */
  codeMb: number;
}

const CODE_SPACES = ['code_space', 'code_large_object_space', 'trusted_space', 'trusted_large_object_space'];
const MB = 2 ** 20;

/** The replica's heap after two compacting collections (/debug/gc?compact). */
export async function idleHeap(replica: GatewayChild): Promise<Heap> {
  // Twice: the first may leave what only a second one frees (weak callbacks, finalizers).
  await replica.gc(true);
  const answer: HeapUsage = await replica.gc(true);
  const code = CODE_SPACES.reduce((n, name) => n + (answer.spaces?.[name]?.used ?? 0), 0);
  return { mb: answer.heapUsed / MB, codeMb: code / MB };
}

/** How two idle heaps compare, for a test's message: the growth, and how much of it is V8's code. */
export const growth = (before: Heap, after: Heap): string =>
  `${before.mb.toFixed(2)} → ${after.mb.toFixed(2)} MB (${(after.mb - before.mb).toFixed(2)} MB, of which V8's code and bytecode ${(after.codeMb - before.codeMb).toFixed(2)} MB)`;

/** The replica's heap in MB after a full collection (under load: a sample of a trend). */
export async function heapMb(replica: GatewayChild): Promise<number> {
  return (await replica.gc()).heapUsed / MB;
}

export async function structures(replica: GatewayChild): Promise<Structures> {
  const res = await request(`${replica.opsUrl}/debug/structures`);
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new Error(`GET /debug/structures answered ${res.statusCode}: a build without it, or a replica started without --expose-gc`);
  }
  return (await res.body.json()) as Structures;
}

/** The structures that still hold something. */
const nonZero = (held: Record<string, number>): Record<string, number> => Object.fromEntries(Object.entries(held).filter(([, n]) => n !== 0));

/** What waitIdle answers for a build without /debug/structures (LONGRUN_TEST_GATEWAY_MAIN: an older gateway, measured all the same). */
const NO_STRUCTURES = { 'GET /debug/structures: not in this build': 1 } as const;

/**
 * Waits until every held structure of the replica is 0 (or `timeoutMs` passed); answers what
 * is still held (empty: idle). A build without /debug/structures is waited for until its
 * /runs is empty, and answers NO_STRUCTURES.
 */
export async function waitIdle(replica: GatewayChild, timeoutMs: number): Promise<Record<string, number>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await request(`${replica.opsUrl}/debug/structures`);
    let held: Record<string, number>;
    if (res.statusCode === 404) {
      await res.body.dump();
      const runs = await replica.runsInFlight();
      held = runs === 0 ? { ...NO_STRUCTURES } : { runs };
      if (runs === 0) return held;
    } else held = nonZero(((await res.body.json()) as Structures).held);
    if (Object.keys(held).length === 0 || Date.now() > deadline) return held;
    await sleep(200);
  }
}

/**
 * LEAK_SNAPSHOTS=<dir>: the control replica also writes a heap snapshot there at each idle
 * measurement (--heapsnapshot-signal), to compare by retainers when a leak test fails.
 */
const snapshotDir = process.env['LEAK_SNAPSHOTS'] || undefined;

/** The control's node flags beyond LEAK_NODE_ARGS: the snapshot signal, when LEAK_SNAPSHOTS asks for it. */
export const controlNodeArgs = (): string[] => (snapshotDir ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshotDir}`] : []);

/** With LEAK_SNAPSHOTS: asks the replica for a heap snapshot and waits until it is written whole (the ops listener answers again). */
export async function snapshot(replica: GatewayChild): Promise<string | undefined> {
  if (!snapshotDir) return undefined;
  mkdirSync(snapshotDir, { recursive: true });
  const before = new Set(readdirSync(snapshotDir));
  process.kill(replica.pid, 'SIGUSR2');
  for (let i = 0; i < 240; i++) {
    await sleep(250);
    const file = readdirSync(snapshotDir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    // The snapshot is written on the main thread: once the ops listener answers, it is done.
    if (
      file &&
      (await request(`${replica.opsUrl}/-/liveness`).then(
        (r) => r.body.dump().then(() => true),
        () => false,
      ))
    )
      return path.join(snapshotDir, file);
  }
  return undefined;
}
