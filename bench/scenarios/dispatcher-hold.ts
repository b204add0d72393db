/**
 * dispatcher_hold: how long the dispatcher's execute request is held for a turn of T
 * (30 s): detached (the owner answers Detached: true → a 202 on the first action) against
 * the same turn in blocking mode (ndjson until the turn ends). Turns of both modes run
 * side by side; turn_ms is the turn's length as the workflow service saw it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Step } from '../../sandbox/scenario';
import { waitUntil } from '../../stack/wait';
import { formatMs, type Scenario, type ScenarioOutcome } from '../scenario';
import { startBenchStack } from '../bench-stack';
import { median, ratio, round } from '../measure/stats';

const DEFAULT_TURN_MS = 30_000;
const TARGET_MS = 50;
const WARM_TURNS = 20;
const STAGGER_MS = 200;

export const dispatcherHold: Scenario = {
  name: 'dispatcher_hold',
  sizes: 'turns per mode, run side by side',
  defaultRuns: 5,
  async run(ctx): Promise<ScenarioOutcome> {
    const turns = ctx.options.runs ?? this.defaultRuns;
    const turnMs = ctx.options.turnMs ?? DEFAULT_TURN_MS;
    const steps: Step[] = [{ op: 'checkpoint', text: 'started' }, { op: 'wait', ms: turnMs }, { op: 'checkpoint', text: 'done', status: 'FINISHED' }, { op: 'end' }];
    const stack = await startBenchStack(ctx.env, { connections: turns * 2 + 2 });
    try {
      for (let i = 0; i < turns; i++) await stack.owner.query('configure', { workflowId: `hold-blocking-${i}`, config: { detached: false } });
      // A warm gateway, as in production: connections to the owner, Redis and the workflow
      // service open, code compiled. A cold process's first execute costs ~100 ms more.
      const warm: Step[] = [{ op: 'checkpoint', text: 'warm' }, { op: 'end' }];
      for (let i = 0; i < WARM_TURNS; i++) {
        await stack.owner.query('configure', { workflowId: `warm-blocking-${i}`, config: { detached: false } });
        await Promise.all([stack.load.execute(`warm-detached-${i}`, warm), stack.load.execute(`warm-blocking-${i}`, warm)]);
      }
      const run = async (mode: 'detached' | 'blocking', i: number): Promise<number> => {
        // Dispatchers start turns one at a time, not in one instant: stagger the starts.
        await sleep((2 * i + (mode === 'detached' ? 0 : 1)) * STAGGER_MS);
        const result = await stack.load.execute(`hold-${mode}-${i}`, steps);
        const expected = mode === 'detached' ? 202 : 200;
        if (result.status !== expected) throw new Error(`${mode} turn answered ${result.status}, expected ${expected}: ${result.body.slice(0, 300)}`);
        if (mode === 'blocking' && !result.body.includes('FINISHED')) throw new Error(`blocking turn ended without its last checkpoint: ${result.body.slice(0, 300)}`);
        return result.ms;
      };
      const [detached, blocking] = await Promise.all([
        Promise.all(Array.from({ length: turns }, (_, i) => run('detached', i))),
        Promise.all(Array.from({ length: turns }, (_, i) => run('blocking', i))),
      ]);
      await waitUntil(
        async () => (await stack.workflow.query('callCounts', { prefix: 'hold-' })).ended >= turns * 2,
        turnMs + turns * 2 * STAGGER_MS + 15_000,
        'every turn to end',
      );
      const calls = await stack.workflow.query('calls', { prefix: 'hold-detached-' });
      const turnLengths = calls.map((c) => (c.endedAt ?? Number.NaN) - c.startedAt);
      const detachedMs = median(detached);
      const blockingMs = median(blocking);
      const r = ratio(detachedMs, blockingMs, 5);
      ctx.log(`detached holds ${detached.map((v) => v.toFixed(1)).join(', ')} ms; blocking ${blocking.map((v) => v.toFixed(0)).join(', ')} ms`);
      return {
        figures: {
          turn_ms: round(median(turnLengths), 0),
          detached_hold_ms: round(detachedMs, 1),
          blocking_hold_ms: round(blockingMs, 0),
          ratio: r,
          turns_per_mode: turns,
          detached_hold_max_ms: round(Math.max(...detached), 1),
        },
        row: {
          longrun: `held ${formatMs(detachedMs)} for a ${(median(turnLengths) / 1_000).toFixed(1)} s turn`,
          baseline: `blocking held ${formatMs(blockingMs)}`,
          ratio: r === null ? 'n/a' : `${r}x`,
          target: `< ${TARGET_MS} ms`,
          met: Math.max(...detached) < TARGET_MS,
        },
      };
    } finally {
      await stack.close();
    }
  },
};
