/**
 * A whole stack on loopback for in-process tests: the simulated owner and workflow
 * services and a real Gateway (both listeners on port 0), optionally on a real
 * redis-server (the test's own, or one the stack starts and stops). Logs are captured as
 * raw bytes so tests can search them.
 */
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { request, type Dispatcher } from 'undici';
import { gatewayConfig, loadConfig } from '../../src/config';
import { Gateway } from '../../src/gateway';
import { createLogger } from '../../src/core/log';
import type { Tracing } from '../../src/observability/tracing';
import { OwnerServiceSimulator, type PreauthConfig } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { WorkflowServiceSimulator, type WorkflowSimulatorOptions } from '../../sandbox/workflow-sim';
import { WorkhorseFront } from '../../sandbox/workhorse-front';
import { resume, startRedis, type RedisServer } from './redis';
import { removeSecretFile, testSecret, writeSecretFile } from './secret';

export interface StackOptions {
  env?: Record<string, string>;
  /** A redis-server the test started (and stops) itself. */
  redisUrl?: string;
  /**
   * A fresh redis-server of the stack's own (startRedis) with an ioredis client on it:
   * `stack.redis` and `stack.client`. close() also disconnects the client and stops the
   * server, resuming it first in case the test paused it (SIGSTOP).
   */
  redis?: boolean;
  preauth?: PreauthConfig;
  workflow?: WorkflowSimulatorOptions;
  /** Relays through a Workhorse-like front of the owner (LONGRUN_RELAY_URL: `stack.front`), as beside GitLab. */
  workhorseFront?: boolean;
  /** The gateway's spans go here (test/helpers/spans.ts: the SDK's in-memory exporter). */
  tracing?: Tracing;
}

export interface ExecuteOptions {
  steps?: Step[];
  body?: unknown;
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
  query?: string;
  signal?: AbortSignal;
}

export interface Stack {
  gateway: Gateway;
  owner: OwnerServiceSimulator;
  workflow: WorkflowServiceSimulator;
  /** With `workhorseFront: true`: the front the relays go through. */
  front?: WorkhorseFront;
  url: string;
  opsUrl: string;
  logs: () => string;
  execute(workflowId: string, options?: ExecuteOptions): Promise<Dispatcher.ResponseData>;
  executeText(workflowId: string, options?: ExecuteOptions): Promise<{ status: number; headers: Dispatcher.ResponseData['headers']; text: string }>;
  metrics(): Promise<string>;
  /** With `redis: true`: the stack's own redis-server, and a client on it (errors ignored). */
  redis?: RedisServer;
  client?: Redis;
  /**
   * Another gateway on the same owner, workflow service and Redis (another replica:
   * `LONGRUN_REPLICA_ID` in `env`), closed with the stack; its spans go to `tracing` when given.
   */
  peer(env: Record<string, string>, tracing?: Tracing): Promise<Peer>;
  close(): Promise<void>;
}

export interface Peer {
  gateway: Gateway;
  url: string;
  opsUrl: string;
  logs: () => string;
  metrics(): Promise<string>;
  close(): Promise<void>;
}

async function startPeer(env: Record<string, string>, tracing?: Tracing): Promise<Peer> {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(Buffer.from(chunk));
      cb();
    },
  });
  const config = gatewayConfig(loadConfig(env));
  const gateway = await Gateway.start(config, { logger: createLogger(config.logLevel, sink), ...(tracing ? { tracing } : {}) });
  let closing: Promise<void> | undefined;
  return {
    gateway,
    url: gateway.mainUrl,
    opsUrl: gateway.opsUrl,
    logs: () => Buffer.concat(chunks).toString('utf8'),
    async metrics() {
      return (await request(`${gateway.opsUrl}/metrics`)).body.text();
    },
    close: () => (closing ??= gateway.close().then(() => undefined)),
  };
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  if (!options.redis) return startGatewayStack(options);
  if (options.redisUrl !== undefined) throw new Error('startStack: redis and redisUrl exclude each other');
  const redis = await startRedis();
  const client = new Redis(redis.url);
  client.on('error', () => undefined);
  const closeRedis = async (): Promise<void> => {
    client.disconnect();
    resume(redis);
    await redis.stop();
  };
  let stack: Stack;
  try {
    stack = await startGatewayStack({ ...options, redisUrl: redis.url });
  } catch (err) {
    await closeRedis();
    throw err;
  }
  return {
    ...stack,
    redis,
    client,
    async close() {
      await stack.close();
      await closeRedis();
    },
  };
}

async function startGatewayStack(options: StackOptions): Promise<Stack> {
  const workflow = await WorkflowServiceSimulator.start(options.workflow);
  const owner = await OwnerServiceSimulator.start({
    secret: testSecret,
    workflowServiceUri: workflow.address,
    defaults: options.preauth ?? {},
  });
  const front = options.workhorseFront ? await WorkhorseFront.start({ upstream: owner.url, secret: testSecret }) : undefined;
  const secretFile = await writeSecretFile();
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(Buffer.from(chunk));
      cb();
    },
  });
  const baseEnv = {
    LONGRUN_LISTEN: '127.0.0.1:0',
    LONGRUN_OPS_LISTEN: '127.0.0.1:0',
    LONGRUN_OWNER_URL: owner.url,
    ...(front ? { LONGRUN_RELAY_URL: front.url } : {}),
    LONGRUN_SECRET_FILE: secretFile,
    LONGRUN_LOG_LEVEL: 'debug',
    ...(options.redisUrl ? { LONGRUN_REDIS_URL: options.redisUrl } : {}),
    ...options.env,
  };
  const config = gatewayConfig(loadConfig(baseEnv));
  const peers: Peer[] = [];
  const gateway = await Gateway.start(config, { logger: createLogger(config.logLevel, sink), ...(options.tracing ? { tracing: options.tracing } : {}) });
  const url = gateway.mainUrl;

  const execute = (workflowId: string, opts: ExecuteOptions = {}): Promise<Dispatcher.ResponseData> => {
    const body =
      opts.rawBody ?? JSON.stringify(opts.body ?? { goal: 'test goal', workflowMetadata: scenarioMetadata(opts.steps ?? [{ op: 'checkpoint', text: 'done' }, { op: 'end' }]) });
    return request(`${url}/api/v4/ai/duo_workflows/workflows/${workflowId}/execute${opts.query ?? ''}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...opts.headers },
      body,
      signal: opts.signal,
    });
  };

  return {
    gateway,
    owner,
    workflow,
    ...(front ? { front } : {}),
    url,
    opsUrl: gateway.opsUrl,
    logs: () => Buffer.concat(chunks).toString('utf8'),
    execute,
    async executeText(workflowId, opts) {
      const res = await execute(workflowId, opts);
      return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
    },
    async metrics() {
      const res = await request(`${gateway.opsUrl}/metrics`);
      return res.body.text();
    },
    async peer(env, tracing) {
      const peer = await startPeer({ ...baseEnv, ...env }, tracing);
      peers.push(peer);
      return peer;
    },
    async close() {
      await Promise.allSettled([gateway.close(), ...peers.map((p) => p.close())]);
      await Promise.allSettled([owner.close(), workflow.close(), front?.close(), removeSecretFile(secretFile)]);
    },
  };
}

/** The value of one sample in Prometheus text, or undefined when absent. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (.+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found: Record<string, string> = {};
    for (const pair of (match[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) found[pair[1] as string] = pair[2] as string;
    if (Object.entries(labels).every(([k, v]) => found[k] === v) && Object.keys(found).length === Object.keys(labels).length) {
      return Number(match[4]);
    }
  }
  return undefined;
}

/** ndjson lines of a blocking response (empty keepalive lines included as ''). */
export function ndjsonLines(text: string): string[] {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}
