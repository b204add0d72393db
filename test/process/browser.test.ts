/**
 * The sandbox's web chat page (sandbox/chat.html) in a real browser: Debian's headless
 * Chromium driven by puppeteer-core, against the sandbox as `npm start` composes it — the
 * simulated owner and workflow service, and the gateway with the sandbox's routes — in this
 * process. What a user sees (the checkpoints, close code 1000) and what the peers received
 * (the preauth's path and query, the startRequest, the page's answer to runReadFile, the
 * gateway's metrics); and pages of other origins refused before the upgrade, since the
 * browser sends their Origin. The browser is launched once for the file; every test gets
 * its own sandbox, gateway and browser context.
 */
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import puppeteer, { type Browser, type BrowserContext, type Frame, type Page } from 'puppeteer-core';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config';
import { Gateway } from '../../src/gateway';
import { createLogger } from '../../src/core/log';
import { CHAT_PATH, DROP_PATH, chatUrl } from '../../sandbox/chat-page';
import { sandboxTurn, startSandbox, type Sandbox } from '../../sandbox/sandbox';
import type { CallRecord } from '../../sandbox/workflow-sim';
import { startRedis } from '../../stack/redis-server';
import { metricValue, startStack } from '../../stack';

/** Debian's `chromium` (scripts/ensure-test-deps.sh installs it). */
const CHROMIUM = '/usr/bin/chromium';
const WS_PATH = '/api/v4/ai/duo_workflows/ws';
/** Flags that work in a container as root with no display, GPU or network. */
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** One test's sandbox, gateway (its log captured), browser context and servers. */
interface World {
  sandbox: Sandbox;
  gateway: Gateway;
  logs(): string;
  context: BrowserContext;
  /** Every URL the context's pages requested, and every error they reported. */
  requests: string[];
  pageErrors: string[];
  servers: http.Server[];
}

let profile: string | undefined;
let browser: Browser | undefined;
/** Why there is no browser to test with. */
let noBrowser: Error | undefined;
let world: World | undefined;

async function newPage(w: World): Promise<Page> {
  const page = await w.context.newPage();
  page.setDefaultTimeout(30_000);
  page.on('request', (req) => w.requests.push(req.url()));
  page.on('pageerror', (err) => w.pageErrors.push(String(err)));
  page.on('console', (message) => {
    if (message.type() === 'error') w.pageErrors.push(message.text());
  });
  return page;
}

const textOf = (page: Page | Frame, selector: string): Promise<string> => page.$eval(selector, (el) => el.textContent ?? '');

/** The page's `document`, for functions evaluated in it (this project's TypeScript has no DOM lib). */
declare const document: { querySelector(selector: string): { textContent: string | null } | null };

/** Waits until the element's text matches `pattern`. */
async function waitForText(page: Page | Frame, selector: string, pattern: RegExp): Promise<void> {
  await page.waitForFunction(
    (sel: string, source: string, flags: string) => new RegExp(source, flags).test(document.querySelector(sel)?.textContent ?? ''),
    { timeout: 30_000 },
    selector,
    pattern.source,
    pattern.flags,
  );
}

/** The page's frame log: direction (in/out/info) and text of every entry. */
function frameLog(page: Page): Promise<Array<{ direction: string; text: string }>> {
  return page.$$eval('#log li', (items) => items.map((li) => ({ direction: li.className, text: li.textContent ?? '' })));
}

/** The gateway's JSON log lines with this message. */
function logLines(w: World, msg: string): Array<Record<string, unknown>> {
  return w
    .logs()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line['msg'] === msg);
}

async function metrics(w: World): Promise<string> {
  const res = await request(`${w.gateway.opsUrl}/metrics`);
  return res.body.text();
}

describe('in Chromium', () => {
  // A missing browser fails every test here (in beforeEach): none is skipped, and each counts as failed.
  beforeAll(async () => {
    try {
      accessSync(CHROMIUM, constants.X_OK);
    } catch {
      noBrowser = new Error(
        `${CHROMIUM} is not installed: these tests drive a real browser. Install Debian's chromium (as root: bash scripts/ensure-test-deps.sh, or apt-get install chromium)`,
      );
      return;
    }
    profile = mkdtempSync(path.join(os.tmpdir(), 'longrun-chromium-'));
    try {
      browser = await puppeteer.launch({
        executablePath: CHROMIUM,
        // 'shell': puppeteer passes plain --headless (not --headless=new).
        headless: 'shell',
        args: CHROMIUM_ARGS,
        userDataDir: profile,
        timeout: 60_000,
        protocolTimeout: 60_000,
      });
    } catch (err) {
      noBrowser = new Error(`${CHROMIUM} did not start: ${(err as Error).message}`, { cause: err });
    }
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    browser = undefined;
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  /** The sandbox, its gateway (with `extraEnv`) and a browser context. */
  async function openWorld(extraEnv: Record<string, string> = {}): Promise<World> {
    const env = loadConfig({ LONGRUN_LISTEN: '127.0.0.1:0', LONGRUN_OPS_LISTEN: '127.0.0.1:0', LONGRUN_LOG_LEVEL: 'info', ...extraEnv });
    const sandbox = await startSandbox(env);
    const chunks: Buffer[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        chunks.push(Buffer.from(chunk));
        cb();
      },
    });
    let gateway: Gateway | undefined;
    try {
      gateway = await Gateway.start(sandbox.config, { logger: createLogger(sandbox.config.logLevel, sink), sandboxRoutes: sandbox.routes });
      const started = gateway;
      sandbox.showRuns(() => started.runs());
      const context = await (browser as Browser).createBrowserContext();
      return { sandbox, gateway, logs: () => Buffer.concat(chunks).toString('utf8'), context, requests: [], pageErrors: [], servers: [] };
    } catch (err) {
      await gateway?.close();
      await sandbox.close();
      throw err;
    }
  }

  beforeEach(async () => {
    if (noBrowser) throw noBrowser;
    world = await openWorld();
  }, 30_000);

  afterEach(async () => {
    await closeWorld();
  }, 30_000);

  async function closeWorld(): Promise<void> {
    const w = world;
    world = undefined;
    if (!w) return;
    await w.context.close().catch(() => undefined);
    await Promise.allSettled(
      w.servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
            server.closeAllConnections();
          }),
      ),
    );
    await w.gateway.close();
    await w.sandbox.close();
  }

  describe('the sandbox chat page', () => {
    it('runs a session over the WebSocket route: the user sees the checkpoints and close 1000; the peers saw the browser’s preauth, start and answer', async () => {
      const w = world as World;
      const page = await newPage(w);
      const url = chatUrl(w.gateway.mainUrl);
      const res = await page.goto(url, { waitUntil: 'load' });
      expect(res?.status()).toBe(200);
      expect(res?.headers()['content-security-policy']).toContain("connect-src 'self'");
      expect(await textOf(page, '#status')).toBe('idle');

      const goal = 'summarize the README from a browser';
      await page.locator('#goal').fill(goal);
      await page.click('#start');
      await waitForText(page, '#status', /^closed/);

      // What the user sees.
      expect(await textOf(page, '#status')).toBe('closed with code 1000 (normal closure)');
      const checkpoints = await page.$$eval('#checkpoints li', (items) => items.map((li) => [li.querySelector('.state')?.textContent, li.lastChild?.textContent]));
      expect(checkpoints).toEqual([
        ['RUNNING', `planning: ${goal}`],
        ['RUNNING', 'read README.md'],
        ['FINISHED', 'done'],
      ]);
      const log = await frameLog(page);
      expect(log.map((entry) => entry.direction)).toEqual(['out', 'in', 'in', 'out', 'in', 'in', 'info']);
      expect(log.at(-1)?.text).toBe('closed 1000');
      const [start, , readFile, answer] = log.map((entry) => (entry.direction === 'info' ? undefined : (JSON.parse(entry.text) as Record<string, Record<string, unknown>>)));
      expect(readFile?.['runReadFile']).toMatchObject({ filepath: 'README.md' });
      expect(answer?.['actionResponse']).toMatchObject({ requestID: readFile?.['requestID'] });
      const workflowId = start?.['startRequest']?.['workflowID'] as string;
      expect(workflowId).toMatch(/^\d+$/);

      // The owner was asked to preauthorize the web chat's GET, path and query as the browser sent them.
      expect(w.sandbox.owner.preauths.map((p) => `${p.method} ${p.path}`)).toEqual([`GET ${WS_PATH}?client_type=browser`]);
      // The browser sent its Origin, the page's own: that is why the upgrade was allowed.
      expect(w.sandbox.owner.preauths[0]?.headers['origin']).toBe(new URL(url).origin);
      // The workflow service got the page's start and its answer to runReadFile, and the flow ended OK.
      const call = w.sandbox.workflow.callsFor(workflowId)[0] as CallRecord;
      expect(call.startRequest).toMatchObject({ workflowID: workflowId, goal });
      const sent = (answer?.['actionResponse'] as { plainTextResponse: { response: string } }).plainTextResponse.response;
      expect(sent).toContain('read by the browser');
      expect(call.actionResponses).toEqual([
        expect.objectContaining({
          kind: 'runReadFile',
          requestID: readFile?.['requestID'],
          response: expect.objectContaining({ plainTextResponse: expect.objectContaining({ response: sent }) }),
        }),
      ]);
      expect(call.protocolErrors).toEqual([]);
      await w.sandbox.workflow.waitFor(() => call.ended !== undefined, 5_000, 'the call ended');
      expect(call.ended?.how).toBe('ok');

      // The gateway counted it as a WebSocket session (once its run is gone).
      await expect.poll(() => w.gateway.registry.size, { timeout: 5_000 }).toBe(0);
      const text = await metrics(w);
      expect(metricValue(text, 'longrun_connections_total', { transport: 'websocket' })).toBe(1);
      expect(metricValue(text, 'longrun_teardowns_total', { transport: 'websocket', reason: 'finished' })).toBe(1);
      expect(metricValue(text, 'longrun_websocket_frames_total', { direction: 'in' })).toBe(2);
      expect(metricValue(text, 'longrun_websocket_frames_total', { direction: 'out' })).toBe(4);
      expect(logLines(w, 'websocket upgrade').map((line) => line['reason'])).toEqual(['upgraded']);

      // Self-contained: the page loaded nothing but itself (and the browser's own favicon probe) from the gateway.
      expect(w.requests.filter((r) => !r.startsWith(`${w.gateway.mainUrl}/`))).toEqual([]);
      expect(w.requests).toContain(url);
      expect(w.pageErrors).toEqual([]);
    }, 60_000);

    it('"Drop the connection" mid-run loses the socket without a close frame; the page reconnects with a resume start, re-attaches and sees the run carry on to close 1000: one call, no stop', async () => {
      const w = world as World;
      const page = await newPage(w);
      await page.goto(chatUrl(w.gateway.mainUrl), { waitUntil: 'load' });
      expect(await page.$eval('#drop', (el) => (el as unknown as { disabled: boolean }).disabled)).toBe(true);
      const goal = 'summarize the README, then lose the network';
      await page.locator('#goal').fill(goal);
      await page.click('#start');
      // The file is read; the scenario works a few seconds before its last checkpoint: drop now, mid-turn.
      await waitForText(page, '#checkpoints', /read README\.md/);
      await page.click('#drop');
      await waitForText(page, '#log', /re-attached to workflow/);
      await waitForText(page, '#status', /^closed/);

      // What the user sees: the loss, the resume, the re-attach, then the run's last checkpoint and close 1000.
      expect(await textOf(page, '#status')).toBe('closed with code 1000 (normal closure)');
      const checkpoints = await page.$$eval('#checkpoints li', (items) => items.map((li) => [li.querySelector('.state')?.textContent, li.lastChild?.textContent]));
      expect(checkpoints).toEqual([
        ['RUNNING', `planning: ${goal}`],
        ['RUNNING', 'read README.md'],
        ['FINISHED', 'done'],
      ]);
      const log = await frameLog(page);
      const infos = log.filter((entry) => entry.direction === 'info').map((entry) => entry.text);
      const starts = log
        .filter((entry) => entry.direction === 'out' && entry.text.includes('startRequest'))
        .map((entry) => (JSON.parse(entry.text) as { startRequest: Record<string, unknown> }).startRequest);
      expect(starts).toHaveLength(2);
      const workflowId = starts[0]?.['workflowID'] as string;
      expect(starts[0]).toMatchObject({ goal });
      // The resume start: the same workflow, an empty goal, no approval.
      expect(starts[1]).toEqual({ workflowID: workflowId, goal: '' });
      expect(infos).toEqual([
        'dropping the connection (no close frame)',
        `connection lost (1006): reconnecting to resume workflow ${workflowId}`,
        `re-attached to workflow ${workflowId}`,
        'closed 1000',
      ]);
      // After the re-attach: the last checkpoint, live.
      const after = log.slice(log.findIndex((entry) => entry.text === `re-attached to workflow ${workflowId}`));
      expect(after.some((entry) => entry.direction === 'in' && entry.text.includes('"done"'))).toBe(true);

      // The workflow service saw one call for the workflow: one start, no stop, ended OK.
      const calls = w.sandbox.workflow.callsFor(workflowId);
      expect(calls).toHaveLength(1);
      const call = calls[0] as CallRecord;
      expect(call.startRequest).toMatchObject({ workflowID: workflowId, goal });
      await w.sandbox.workflow.waitFor(() => call.ended !== undefined, 5_000, 'the call ended');
      expect(call.ended?.how).toBe('ok');
      expect(call.stopReasons).toEqual([]);
      expect(call.protocolErrors).toEqual([]);
      // Two connections, each preauthorized (the owner named the sandbox's actor), one run parked and re-attached.
      expect(w.sandbox.owner.preauths.map((p) => `${p.method} ${p.path}`)).toEqual([`GET ${WS_PATH}?client_type=browser`, `GET ${WS_PATH}?client_type=browser`]);
      await expect.poll(() => w.gateway.registry.size, { timeout: 5_000 }).toBe(0);
      const text = await metrics(w);
      expect(metricValue(text, 'longrun_websocket_parked_total')).toBe(1);
      expect(metricValue(text, 'longrun_websocket_reattached_total', { how: 'local' })).toBe(1);
      expect(metricValue(text, 'longrun_teardowns_total', { transport: 'websocket', reason: 'finished' })).toBe(1);
      expect(logLines(w, 'websocket upgrade').map((line) => line['reason'])).toEqual(['upgraded', 'upgraded']);
      expect(w.pageErrors).toEqual([]);
    }, 60_000);
  });

  describe('the runs view', () => {
    it('a start the store fence refuses (a Redis younger than a lease TTL): the page says it waits for the lock store, starts again by itself when the 1013 says, and the run finishes', async () => {
      // This test's world: the sandbox beside a new, unmarked Redis and a 5 s lease (time enough to load the page and start before the fence ends).
      await closeWorld();
      const redis = await startRedis({ mark: false });
      try {
        world = await openWorld({ LONGRUN_REDIS_URL: redis.url, LONGRUN_LEASE_TTL_MS: '5000' });
        const w = world;
        const page = await newPage(w);
        await page.goto(chatUrl(w.gateway.mainUrl), { waitUntil: 'load' });
        await page.click('#start');
        await waitForText(page, '#status', /^waiting for the workflow lock store: starting again in \d s$/);
        await waitForText(page, '#status', /^closed/);
        expect(await textOf(page, '#status')).toBe('closed with code 1000 (normal closure)');
        const log = await frameLog(page);
        expect(log[0]?.direction).toBe('out');
        expect(log[1]).toEqual({
          direction: 'info',
          text: expect.stringMatching(/^closed 1013: the workflow lock store is new \(no longrun marker\): fenced until it is 5 s old, retry in \d s; starting again in \d s$/),
        });
        // The same start again, then the run as usual.
        expect(log[2]).toMatchObject({ direction: 'out' });
        expect(JSON.parse(log[2]?.text ?? '{}')).toEqual(JSON.parse(log[0]?.text ?? ''));
        expect(await page.$$eval('#checkpoints li', (items) => items.length)).toBe(3);
        expect(w.pageErrors).toEqual([]);
      } finally {
        await closeWorld();
        await redis.stop();
      }
    });

    it('lists a detached run in flight and follows it live: its run, each checkpoint as it comes, its end, then idle', async () => {
      const w = world as World;
      const page = await newPage(w);
      await page.goto(chatUrl(w.gateway.mainUrl), { waitUntil: 'load' });
      expect(await textOf(page, '#follow-status')).toBe('not following');
      // A detached run, as the sandbox's banner curl starts it: nobody is connected to it.
      const workflowId = '77';
      const res = await request(`${w.gateway.mainUrl}/api/v4/ai/duo_workflows/workflows/${workflowId}/execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(sandboxTurn()),
      });
      expect(res.statusCode).toBe(202);
      await res.body.dump();
      const row = `#runs tr[data-workflow="${workflowId}"]`;
      await page.waitForSelector(`${row} button.follow`, { timeout: 10_000 });
      const cells = await page.$$eval(`${row} td`, (tds) => tds.map((td) => td.textContent ?? ''));
      expect(cells.slice(2, 4)).toEqual(['detached', 'running']);
      await page.click(`${row} button.follow`);
      await waitForText(page, '#follow-status', /^live$/);
      // Live: a checkpoint of the run shows while its last one is still seconds away.
      await waitForText(page, '#follow-events', /read the project|wrote the answer/);
      expect(await textOf(page, '#follow-events')).not.toContain('FINISHED done');
      // The page's row counts its follower while it follows.
      await waitForText(page, `${row} td:nth-child(6)`, /^1$/);
      await waitForText(page, '#follow-status', /^idle$/);

      const events = await page.$$eval('#follow-events li', (items) =>
        items.map((li) => [(li as unknown as { dataset: Record<string, string> }).dataset['kind'], li.querySelector('.id')?.textContent ?? '', li.lastChild?.textContent ?? '']),
      );
      expect(events[0]?.[0]).toBe('run');
      expect(events[0]?.[2]).toMatch(/^run [0-9a-f]{8} \(detached\) on /);
      expect(events.slice(-3).map((e) => e[0])).toEqual(['checkpoint', 'end', 'idle']);
      expect(events.at(-3)?.[2]).toBe('FINISHED done');
      expect(events.at(-2)?.[2]).toBe('finished');
      const checkpoints = events.filter((e) => e[0] === 'checkpoint').map((e) => e[2]);
      expect(checkpoints).toContain('RUNNING wrote the answer');
      // Every event but idle carries its id (EventSource's lastEventId), increasing by one.
      const ids = events.slice(0, -1).map((e) => Number(e[1]));
      expect(ids).toEqual(ids.map((_, i) => (ids[0] as number) + i));
      // The owner was asked, as a GET of the follow route's path, with the browser's own Accept.
      const followPreauth = w.sandbox.owner.preauths.find((p) => p.path.endsWith('/follow'));
      expect(`${followPreauth?.method} ${followPreauth?.path}`).toBe(`GET /api/v4/ai/duo_workflows/workflows/${workflowId}/follow`);
      expect(followPreauth?.headers['accept']).toBe('text/event-stream');
      const text = await metrics(w);
      expect(metricValue(text, 'longrun_follow_events_sent_total', { kind: 'idle' })).toBe(1);
      expect(metricValue(text, 'longrun_followers_open')).toBe(0);
      expect(w.pageErrors).toEqual([]);
    }, 60_000);
  });

  describe('a page of another origin', () => {
    /** A page that opens the gateway's WebSocket route and writes what its socket saw into #result. */
    function probePage(wsUrl: string): string {
      return `<!doctype html><meta charset="utf-8"><title>elsewhere</title><p id="result">pending</p>
  <script>
    const seen = [];
    const ws = new WebSocket(${JSON.stringify(wsUrl)});
    ws.onopen = () => seen.push('open');
    ws.onerror = () => seen.push('error');
    ws.onclose = (event) => { seen.push('close ' + event.code); document.getElementById('result').textContent = seen.join(', '); };
  </script>`;
    }

    async function refusedFrom(w: World, page: Page | Frame): Promise<void> {
      await waitForText(page, '#result', /close \d+$/);
      // The browser's view of a refused upgrade: an error, then close 1006 (no close frame).
      expect(await textOf(page, '#result')).toBe('error, close 1006');
      await expect.poll(() => logLines(w, 'websocket upgrade').map((line) => line['reason']), { timeout: 5_000 }).toEqual(['FORBIDDEN_ORIGIN']);
      const text = await metrics(w);
      expect(metricValue(text, 'longrun_connection_errors_total', { transport: 'websocket', error_type: 'bad_request' })).toBe(1);
      expect(metricValue(text, 'longrun_connections_total', { transport: 'websocket' })).toBe(0);
      // Refused before the owner was asked, and nothing reached the workflow service.
      expect(w.sandbox.owner.preauths).toEqual([]);
      expect(w.sandbox.workflow.calls).toEqual([]);
    }

    /** Serves `page` on another loopback port: another origin than the gateway's. */
    async function serveElsewhere(w: World, page: string): Promise<string> {
      const server = http.createServer((_req, res) => {
        res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
        res.end(page);
      });
      w.servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', resolve);
      });
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      expect(new URL(url).origin).not.toBe(new URL(w.gateway.mainUrl).origin);
      return url;
    }

    const wsUrlOf = (w: World): string => `${w.gateway.mainUrl.replace(/^http/, 'ws')}${WS_PATH}?client_type=browser`;

    it('served from another port of the same host: its Origin is refused before the upgrade (FORBIDDEN_ORIGIN), no preauth', async () => {
      const w = world as World;
      const page = await newPage(w);
      await page.goto(await serveElsewhere(w, probePage(wsUrlOf(w))), { waitUntil: 'load' });
      await refusedFrom(w, page);
    }, 60_000);

    it('a sandboxed frame (Origin: null) is refused the same way', async () => {
      const w = world as World;
      const frame = `<!doctype html><iframe sandbox="allow-scripts" srcdoc="${probePage(wsUrlOf(w)).replace(/&/g, '&amp;').replace(/"/g, '&quot;')}"></iframe>`;
      const page = await newPage(w);
      await page.goto(await serveElsewhere(w, frame), { waitUntil: 'load' });
      const inner = page.frames().find((f) => f !== page.mainFrame());
      expect(inner).toBeDefined();
      await refusedFrom(w, inner as Frame);
    }, 60_000);
  });
});

it('a gateway with an owner (not the sandbox) serves no chat page', async () => {
  const stack = await startStack();
  try {
    const res = await request(`${stack.url}${CHAT_PATH}`);
    expect(res.statusCode).toBe(404);
    expect(((await res.body.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
    // Nor the sandbox's helper that drops a WebSocket's connection.
    const drop = await request(`${stack.url}${DROP_PATH}?workflow=1`, { method: 'POST' });
    expect(drop.statusCode).toBe(404);
    expect(((await drop.body.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
  } finally {
    await stack.close();
  }
});
