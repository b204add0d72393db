/**
 * No run outlives its caller (issue [11], classes 1, 2 and 4), reproduced the way it
 * happens in production — real sockets, timing windows made wide with the simulators'
 * delays and a real redis-server paused with SIGSTOP:
 *
 *  - a blocking caller that hangs up at any step (preauth, lock, stream open, streaming)
 *    leaves nothing behind: no stream, no lock, no registry entry, one log line;
 *  - a blocking caller that reads nothing holds a bounded amount of the gateway's memory,
 *    slows the service through HTTP/2 flow control, and is ended after the stall limit;
 *  - an absolute-form or asterisk-form request target is refused and never forwarded.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { lockKey } from '../../src/redis/keys';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import type { WorkflowServiceSimulator } from '../../sandbox/workflow-sim';
import { metricValue, startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';

let stack: Stack | undefined;
const cleanups: Array<() => Promise<unknown> | unknown> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  // A stack started with `redis: 'own'` also stops its redis-server (resumed first) and client.
  await stack?.close();
  stack = undefined;
});

const blocking = { detached: false, lockConcurrentFlow: true };

/** Starts an execute and hangs up after `ms`; resolves once the socket is gone. */
async function hangUpAfter(s: Stack, workflowId: string, ms: number, steps: Step[]): Promise<void> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), ms);
  try {
    const res = await s.execute(workflowId, { steps, signal: abort.signal });
    await res.body.text();
  } catch {
    // The hang-up itself.
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Sends a whole execute request on a raw socket and closes the socket after `ms`: the
 * gateway surely has the request, and the caller is gone at that moment whatever it is doing.
 */
async function rawHangUpAfter(s: Stack, workflowId: string, ms: number, steps: Step[]): Promise<void> {
  const body = JSON.stringify({ workflowMetadata: scenarioMetadata(steps) });
  const { port } = new URL(s.url);
  await new Promise<void>((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => {
      socket.write(
        `POST /api/v4/ai/duo_workflows/workflows/${workflowId}/execute HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        () => setTimeout(() => socket.destroy(), ms),
      );
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve());
  });
}

/** Nothing of a run is left: no open call, no lock, nothing in /runs, no run in flight. */
async function expectNothingLeft(s: Stack, ids: string[]): Promise<void> {
  await s.workflow.waitFor(() => s.workflow.openCalls === 0, 5_000, 'no open call');
  for (const id of ids) await expect.poll(() => s.client!.exists(lockKey(id)), { timeout: 5_000 }).toBe(0);
  await expect.poll(async () => (await (await request(`${s.opsUrl}/runs`)).body.json()) as unknown, { timeout: 5_000 }).toEqual({ runs: [] });
  const metrics = await s.metrics();
  expect(metricValue(metrics, 'longrun_runs_in_flight', { transport: 'http' })).toBe(0);
  expect(metricValue(metrics, 'longrun_connections_open', { transport: 'http' })).toBe(0);
}

function executeLines(s: Stack): Array<Record<string, unknown>> {
  return s
    .logs()
    .split('\n')
    .filter((l) => l.includes('"msg":"execute request"'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('a blocking caller that hangs up', () => {
  it('during preauth: nothing is opened, nothing is taken, one CLIENT_GONE line', async () => {
    stack = await startStack({ redis: 'own', preauth: blocking });
    stack.owner.configure('61', { ...blocking, delayMs: 800 });
    await hangUpAfter(stack, '61', 150, [{ op: 'checkpoint' }, { op: 'hang' }]);
    // Well past the moment the owner would have answered.
    await sleep(1_200);
    expect(stack.owner.preauths).toHaveLength(1);
    expect(stack.workflow.callsFor('61')).toEqual([]);
    await expectNothingLeft(stack, ['61']);
    expect(executeLines(stack)).toEqual([expect.objectContaining({ workflow_id: '61', reason: 'CLIENT_GONE' })]);
    expect(metricValue(await stack.metrics(), 'longrun_connection_errors_total', { transport: 'http', error_type: 'client_gone' })).toBe(1);
  });

  it('while the lock is being taken (Redis paused): the late lock is given back, no stream is opened', async () => {
    stack = await startStack({ redis: 'own', preauth: blocking, env: { LONGRUN_REDIS_COMMAND_TIMEOUT_MS: '3000' } });
    process.kill(stack.redis!.pid as number, 'SIGSTOP');
    const hungUp = hangUpAfter(stack, '62', 300, [{ op: 'checkpoint' }, { op: 'hang' }]);
    await sleep(800);
    process.kill(stack.redis!.pid as number, 'SIGCONT');
    await hungUp;
    await sleep(500);
    expect(stack.workflow.callsFor('62')).toEqual([]);
    await expectNothingLeft(stack, ['62']);
    expect(executeLines(stack)).toEqual([expect.objectContaining({ workflow_id: '62', reason: 'CLIENT_GONE' })]);
  });

  it('after the stream opened, before the first line: the call is cancelled and the lock released', async () => {
    stack = await startStack({ redis: 'own', preauth: blocking });
    const abort = new AbortController();
    const pending = stack.execute('63', { steps: [{ op: 'wait', ms: 10_000 }, { op: 'checkpoint' }, { op: 'end' }], signal: abort.signal }).catch(() => undefined);
    await stack.workflow.waitFor(() => stack!.workflow.callsFor('63').length === 1, 5_000, 'call opened');
    abort.abort();
    await pending;
    await expectNothingLeft(stack, ['63']);
    expect(stack.workflow.callsFor('63')[0]?.ended?.how).toBe('cancelled');
  });

  it('20 hang-ups at scattered moments leave no run, lock or stream behind', async () => {
    stack = await startStack({ redis: 'own', preauth: blocking });
    const ids = Array.from({ length: 20 }, (_, i) => `64${String(i).padStart(2, '0')}`);
    ids.forEach((id, i) => stack!.owner.configure(id, { ...blocking, delayMs: (i * 37) % 120 }));
    const steps: Step[] = [{ op: 'wait', ms: 100 }, { op: 'checkpoint', text: 'one' }, { op: 'wait', ms: 100 }, { op: 'checkpoint', text: 'two' }, { op: 'hang' }];
    await Promise.all(ids.map((id, i) => rawHangUpAfter(stack!, id, (i * 53) % 300, steps)));
    await expectNothingLeft(stack, ids);
    await expect.poll(() => executeLines(stack!).length, { timeout: 5_000 }).toBe(20);
    const lines = executeLines(stack);
    // Each one either never started (CLIENT_GONE) or started and ended with its caller.
    for (const line of lines) expect(['CLIENT_GONE', 'client_gone']).toContain(line['reason']);
    const runEnds = stack
      .logs()
      .split('\n')
      .filter((l) => l.includes('"msg":"run ended"'));
    expect(runEnds.every((l) => l.includes('"reason":"client_gone"'))).toBe(true);
  });
});

describe('a blocking caller that reads nothing', () => {
  let fleet: Stack<'process'> | undefined;
  let workflow: WorkflowServiceSimulator | undefined;
  let replica: Replica | undefined;

  afterEach(async () => {
    await fleet?.close();
    fleet = workflow = replica = undefined;
  });

  const rssBytes = (pid: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) * 1024;

  it('holds bounded memory, slows the service through flow control, and is ended after the stall limit', async () => {
    fleet = await startStack({
      gateway: 'process',
      replicas: ['slow-reader'],
      preauth: { detached: false, lockConcurrentFlow: false },
      env: { LONGRUN_CALLER_STALL_MS: '4000', LONGRUN_LOG_LEVEL: 'info' },
    });
    ({ workflow, gateway: replica } = fleet);
    // Warm up: one turn read whole, so the baseline includes a live channel.
    expect((await replica.execute('70', [{ op: 'checkpoint', text: 'warm', bytes: 100_000 }, { op: 'end' }])).status).toBe(200);
    const pid = replica.child.process.pid as number;
    const before = rssBytes(pid);

    // 400 checkpoints of 512 KB (200 MB) to a caller that never reads a byte.
    const steps: Step[] = [{ op: 'repeat', times: 400, steps: [{ op: 'checkpoint', text: 'big', bytes: 512_000 }] }, { op: 'end' }];
    const body = JSON.stringify({ workflowMetadata: scenarioMetadata(steps) });
    const { port } = new URL(replica.url);
    const socket = net.connect({ host: '127.0.0.1', port: Number(port) });
    cleanups.push(() => socket.destroy());
    socket.pause();
    socket.write(
      `POST /api/v4/ai/duo_workflows/workflows/71/execute HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await workflow.waitFor(() => (workflow?.callsFor('71')[0]?.actionsSent ?? 0) > 5, 10_000, 'streaming started');
    await sleep(2_500);
    const sent = workflow.callsFor('71')[0]?.actionsSent ?? 0;
    const grown = rssBytes(pid) - before;
    console.log(`non-reading caller: the service could send ${sent} of 400 checkpoints (${(sent * 0.512).toFixed(0)} MB); gateway RSS grew ${(grown / 1e6).toFixed(1)} MB`);
    // The service is held back: far from the 400 it wanted to send.
    expect(sent).toBeLessThan(120);
    // What the gateway holds for this caller is bounded, not the 200 MB on offer.
    expect(grown).toBeLessThan(80e6);

    // Past the stall limit the run ends as a gone caller.
    await workflow.waitFor(() => workflow?.callsFor('71')[0]?.ended !== undefined, 10_000, 'run ended');
    expect(workflow.callsFor('71')[0]?.ended?.how).toBe('cancelled');
    await expect.poll(() => replica!.child.stdout(), { timeout: 5_000 }).toMatch(/"msg":"run ended".*"reason":"client_gone"|"reason":"client_gone".*"msg":"run ended"/);
    expect(replica.child.stdout()).toContain('blocking caller took nothing');
  });
});

describe('the request target', () => {
  /** Sends raw request bytes and returns the raw response text. */
  function raw(url: string, text: string): Promise<string> {
    const { port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => socket.write(text));
      let out = '';
      socket.on('data', (d: Buffer) => (out += d.toString('utf8')));
      socket.on('end', () => resolve(out));
      socket.on('close', () => resolve(out));
      socket.on('error', reject);
      setTimeout(() => socket.destroy(), 3_000).unref();
    });
  }

  it('absolute-form and asterisk-form are refused with 400 and never reach the owner', async () => {
    stack = await startStack({ preauth: blocking });
    const body = '{}';
    const absolute = await raw(
      stack.url,
      `POST http://evil.example/api/v4/ai/duo_workflows/workflows/80/execute HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(absolute).toMatch(/^HTTP\/1\.1 400 /);
    expect(absolute).toContain('"code":"INVALID_REQUEST"');
    expect(absolute).toMatch(/x-request-id: /i);
    const asterisk = await raw(stack.url, 'OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(asterisk).toMatch(/^HTTP\/1\.1 400 /);
    expect(stack.owner.preauths).toEqual([]);
    expect(stack.workflow.calls).toEqual([]);
    // An ordinary origin-form request still works.
    expect((await stack.executeText('81')).status).toBe(200);
  });
});
