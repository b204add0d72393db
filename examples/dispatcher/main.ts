/**
 * `npm run example:dispatcher`: the reference dispatcher against the sandbox, printing
 * what it does, then stopping by itself.
 *
 * In one process: a redis-server (or REDIS_URL) for the gateway's locks, the queue and
 * the owner state; the simulated owner and workflow services; a gateway with a 2 s run
 * limit; the dispatcher, its segment-end endpoint mounted in the owner. Three turns:
 *
 *   1001  ten steps of 400 ms: the run limit cuts it into segments, each resumed once;
 *   1002  every step relays a slow POST: a segment cut mid-write reports it in_flight,
 *         and the next segment is dispatched with that fact (workflowMetadata.resume);
 *   1003  stopped by the owner halfway: the turn ends as stopped.
 */
import { LongrunClient } from '@longrun/client';
import { Gateway } from '../../src/gateway';
import { gatewayConfig, loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { startSandbox } from '../../sandbox/sandbox';
import type { Step } from '../../sandbox/scenario';
import { startRedis } from '../../stack/redis-server';
import { Dispatcher, type DispatcherEvent } from './dispatcher';
import { segmentEndRoute } from './segment-end-route';

const RUN_LIMIT_MS = 2_000;
const started = Date.now();
const short = (id: string): string => id.slice(0, 8);

function print(line: string): void {
  process.stdout.write(`[${((Date.now() - started) / 1_000).toFixed(2).padStart(6)}s] ${line}\n`);
}

function describe(event: DispatcherEvent): string {
  switch (event.type) {
    case 'turn_started':
      return `turn ${event.workflowId}: started, first segment enqueued`;
    case 'segment_accepted':
      return `turn ${event.workflowId}: segment ${event.segment} ${event.adopted ? 'adopted (409: the run in flight is the turn)' : 'accepted'} — run ${short(event.runId)}${event.attempts > 1 ? ` after ${event.attempts} attempts` : ''}`;
    case 'segment_ended': {
      const inFlight = event.inFlight.length ? ` — in flight: ${event.inFlight.map((a) => `${a.method} #${a.request_id}`).join(', ')} (outcome unknown)` : '';
      return `turn ${event.workflowId}: run ${short(event.runId)} ended (${event.reason}, via ${event.via})${inFlight}`;
    }
    case 'resume_enqueued':
      return `turn ${event.workflowId}: next segment enqueued (job resume-${event.workflowId}-${short(event.after)}…)${event.inFlight.length ? ', carrying in_flight' : ''}`;
    case 'turn_ended':
      return `turn ${event.workflowId}: ENDED ${event.status} (${event.reason})`;
    case 'watchdog':
      return `turn ${event.workflowId}: watchdog finds run ${short(event.runId)} ${event.finding}`;
    case 'job_skipped':
      return `turn ${event.workflowId}: job skipped: ${event.why}`;
    case 'dispatch_error':
      return `turn ${event.workflowId}: execute failed ${event.code}${event.willRetry ? ' (the job will retry)' : ''}: ${event.message}`;
  }
}

async function main(): Promise<void> {
  // A throwaway redis-server (the tests' own, marked as a new store), unless REDIS_URL names one.
  const given = process.env['REDIS_URL'];
  const redis = given
    ? { url: given, stop: async () => undefined }
    : await startRedis().catch((err: unknown) => {
        throw new Error(`${(err as Error).message}; or set REDIS_URL`);
      });
  print(`redis at ${redis.url}`);
  const env = loadConfig({
    LONGRUN_LISTEN: '127.0.0.1:0',
    LONGRUN_OPS_LISTEN: '127.0.0.1:0',
    LONGRUN_REDIS_URL: redis.url,
    LONGRUN_RUN_LIMIT_MS: String(RUN_LIMIT_MS),
    LONGRUN_LEASE_TTL_MS: '3000',
    LONGRUN_LOG_LEVEL: 'warn',
  });
  const sandbox = await startSandbox(env);
  const config = gatewayConfig(sandbox.config);
  const gateway = await Gateway.start(config, { logger: createLogger('error') });
  print(`gateway at ${gateway.mainUrl} (run limit ${RUN_LIMIT_MS} ms), owner at ${sandbox.owner.url}, workflow service at ${sandbox.workflow.address}`);

  const client = new LongrunClient({ url: gateway.mainUrl, secret: config.owner.secret });
  const dispatcher = new Dispatcher({
    client,
    redisUrl: redis.url,
    prefix: `longrun-example-${process.pid}`,
    // Scaled down with the run limit; the defaults (5 min, 90 s) suit a 55-minute run limit.
    watchPeriodMs: 1_000,
    lostConfirmMs: 1_000,
    onEvent: (event) => print(describe(event)),
  });
  sandbox.owner.use(segmentEndRoute(dispatcher, config.owner.secret));
  await dispatcher.ready();

  const turns: Record<string, Step[]> = {
    '1001': [{ op: 'turn', checkpoints: 10, intervalMs: 400 }, { op: 'end' }],
    '1002': [{ op: 'turn', checkpoints: 4, intervalMs: 200, write: { method: 'POST', path: '/api/v4/slow?ms=1500' } }, { op: 'end' }],
    '1003': [{ op: 'turn', checkpoints: 50, intervalMs: 200 }, { op: 'end' }],
  };
  for (const [id, scenario] of Object.entries(turns)) await dispatcher.startTurn(id, { goal: `demo turn ${id}`, metadata: { scenario } });

  setTimeout(() => {
    print('owner: stopping turn 1003');
    void client.stop('1003').then((r) => print(`owner: stop of 1003 → ${r.kind}`));
  }, 3_000).unref();

  const deadline = Date.now() + 40_000;
  let ok = true;
  for (;;) {
    const states = await Promise.all(Object.keys(turns).map((id) => dispatcher.turn(id)));
    if (states.every((t) => t && t.status !== 'dispatching' && t.status !== 'running')) {
      print('every turn has ended:');
      for (const t of states) {
        if (!t) continue;
        print(
          `  ${t.workflowId}: ${t.status} (${t.endedReason}) — ${t.segments} segments, ${t.boundaries} boundaries, ${t.resumes} resumes, ${t.recovered} recovered by the watchdog`,
        );
        if (t.resumes !== t.boundaries || t.finals !== 1) ok = false;
      }
      const carried = sandbox.workflow.calls.filter(
        (c) => c.workflowId === '1002' && (JSON.parse(c.startRequest.workflowMetadata ?? '{}') as { resume?: { in_flight?: unknown[] } }).resume?.in_flight?.length,
      );
      print(`  1002: ${carried.length} segment(s) started with an in_flight write to check before repeating it`);
      break;
    }
    if (Date.now() > deadline) {
      print('gave up waiting for the turns');
      ok = false;
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }

  await dispatcher.close();
  await client.close();
  await gateway.close();
  await sandbox.close();
  await redis.stop();
  print(ok ? 'done' : 'done, with surprises (see above)');
  process.exit(ok ? 0 : 1);
}

main().catch((err: unknown) => {
  process.stderr.write(`example dispatcher failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
