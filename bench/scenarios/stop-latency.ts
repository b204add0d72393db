/**
 * stop_latency: from the owner setting a run's stop key to the workflow service
 * receiving stopWorkflow for that run. The owner's two ways are measured side by side:
 * SET of `workhorse:duoworkflow:stop:<id>` in Redis directly (the figure of docs/spec.md §10),
 * and POST /internal/workflows/:id/stop on the gateway (reported as endpoint_*).
 * Stops are spread over time so each is observed on its own, not as one batch.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { signOwnerJwt } from '../../src/core/jwt';
import type { Step } from '../../sandbox/scenario';
import { closedLoop } from '../clients/load';
import { waitUntil } from '../../stack/wait';
import { formatMs, type Scenario, type ScenarioOutcome } from '../scenario';
import { startBenchStack, type BenchStack } from '../bench-stack';
import { percentile, round } from '../measure/stats';

const held: Step[] = [{ op: 'checkpoint', text: 'holding' }, { op: 'hang' }];
const STOP_INTERVAL_MS = 25;
/** A stop that took longer than this is counted as missed (two lease rounds at the defaults). */
const GIVE_UP_MS = 45_000;
const TARGET_P99_MS = 1_000;

type Mode = 'key' | 'endpoint';

async function endpointAvailable(stack: BenchStack, secret: Buffer): Promise<{ ok: boolean; why: string }> {
  const jwt = await signOwnerJwt(secret, 'stop-probe-none');
  const res = await request(`${stack.gateway.url}/internal/workflows/stop-probe-none/stop`, { method: 'POST', headers: { authorization: `Bearer ${jwt}` } });
  const text = await res.body.text();
  // 409 NOT_CANCELLABLE: the route is there (and no run holds the probe's workflow).
  return { ok: res.statusCode === 409, why: `${res.statusCode} ${text.slice(0, 200)}` };
}

function summary(latencies: number[]): { p50: number; p99: number } {
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

export const stopLatency: Scenario = {
  name: 'stop_latency',
  sizes: 'stops per way (key SET, stop endpoint)',
  defaultRuns: 200,
  async run(ctx): Promise<ScenarioOutcome> {
    const samples = ctx.options.runs ?? this.defaultRuns;
    const stack = await startBenchStack(ctx.env, { connections: 100 });
    try {
      const endpoint = await endpointAvailable(stack, ctx.env.secret);
      if (!endpoint.ok) ctx.log(`stop endpoint not measured: probe answered ${endpoint.why}`);
      const modes: Mode[] = endpoint.ok ? ['key', 'endpoint'] : ['key'];
      const plan = Array.from({ length: samples * modes.length }, (_, i) => ({ id: `stop-${i}`, mode: modes[i % modes.length] as Mode }));

      let accepted = 0;
      await closedLoop(plan.length, 100, async (i) => {
        if ((await stack.load.execute(plan[i]?.id ?? '', held)).status === 202) accepted += 1;
      });
      if (accepted !== plan.length) throw new Error(`only ${accepted} of ${plan.length} runs were accepted: ${stack.gateway.logs()}`);

      // One owner token per workflow (the internal routes refuse a token for another), signed before the clock starts.
      const tokens = new Map<string, string>();
      for (const { id, mode } of plan) if (mode === 'endpoint') tokens.set(id, await signOwnerJwt(ctx.env.secret, id));
      const setAt = new Map<string, number>();
      const failures: string[] = [];
      const sends: Array<Promise<void>> = [];
      const t0 = performance.now();
      for (const [i, { id, mode }] of plan.entries()) {
        const due = t0 + i * STOP_INTERVAL_MS;
        if (due > performance.now()) await sleep(due - performance.now());
        setAt.set(id, Date.now());
        if (mode === 'key') {
          sends.push(ctx.env.redis.client.set(`workhorse:duoworkflow:stop:${id}`, 'USER_STOP', 'PX', 600_000).then(() => undefined));
        } else {
          sends.push(
            request(`${stack.gateway.url}/internal/workflows/${id}/stop`, { method: 'POST', headers: { authorization: `Bearer ${tokens.get(id) ?? ''}` } }).then(async (res) => {
              const text = await res.body.text();
              if (res.statusCode >= 300) failures.push(`${id}: ${res.statusCode} ${text.slice(0, 200)}`);
            }),
          );
        }
      }
      await Promise.all(sends);
      const stopped = async (): Promise<boolean> => (await stack.workflow.query('calls', { prefix: 'stop-' })).every((c) => c.stopReceivedAt.length > 0);
      await waitUntil(stopped, GIVE_UP_MS, 'every stop to reach the workflow service', 250).catch((err: unknown) => ctx.log((err as Error).message));

      const latencies: Record<Mode, number[]> = { key: [], endpoint: [] };
      let missed = 0;
      const calls = await stack.workflow.query('calls', { prefix: 'stop-' });
      const modeOf = new Map(plan.map((p) => [p.id, p.mode]));
      for (const call of calls) {
        const at = call.stopReceivedAt[0];
        const set = setAt.get(call.workflowId);
        const mode = modeOf.get(call.workflowId);
        if (at === undefined || set === undefined || mode === undefined) {
          missed += 1;
          continue;
        }
        latencies[mode].push(at - set);
      }
      const key = summary(latencies.key);
      const viaEndpoint = summary(latencies.endpoint);
      ctx.log(
        `key: p50 ${key.p50} ms, p99 ${key.p99} ms over ${latencies.key.length}; endpoint: p50 ${viaEndpoint.p50} ms, p99 ${viaEndpoint.p99} ms over ${latencies.endpoint.length}; missed ${missed}`,
      );
      return {
        figures: {
          samples: latencies.key.length,
          p50_ms: round(key.p50, 1),
          p99_ms: round(key.p99, 1),
          missed,
          endpoint_samples: latencies.endpoint.length,
          endpoint_p50_ms: round(viaEndpoint.p50, 1),
          endpoint_p99_ms: round(viaEndpoint.p99, 1),
          endpoint_unavailable: endpoint.ok ? undefined : endpoint.why,
          endpoint_failures: failures.slice(0, 10),
        },
        row: {
          longrun: `key SET: p50 ${formatMs(key.p50)}, p99 ${formatMs(key.p99)}; endpoint: ${endpoint.ok ? `p50 ${formatMs(viaEndpoint.p50)}, p99 ${formatMs(viaEndpoint.p99)}` : 'n/a'}`,
          baseline: '-',
          ratio: '-',
          target: `p99 < ${TARGET_P99_MS / 1_000} s`,
          met: missed === 0 && latencies.key.length >= samples && key.p99 < TARGET_P99_MS && (!endpoint.ok || viaEndpoint.p99 < TARGET_P99_MS),
        },
      };
    } finally {
      await stack.close();
    }
  },
};
