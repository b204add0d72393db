/**
 * The client variants the spikes compare, each doing one call's wire work against its
 * target (an `host:port`, or a redis:// URL). The library variants are configured as
 * longrun configures them (the options are longrun's own where it exports them); the raw
 * variants do the same exchange with the least code. Every variant of a pair does the
 * same application work around the wire (JSON.stringify of the body, JSON.parse of the
 * answer, the same protobuf (de)serializers), so a difference is the client's.
 */
import http from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { Pool, type Dispatcher } from 'undici';
import { createRedis } from '../../src/redis/connection';
import { parseRedisUrl } from '../../src/redis/url';
import { readCapped } from '../../src/core/read-capped';
import { userAgent } from '../../src/core/version';
import { channelOptions } from '../../src/workflow/channel-pool';
import { duoWorkflowClientService, type Action, type ClientEvent } from '../../src/workflow/contract';
import type { Call } from './load';
import { RawGrpcChannel } from './raw-grpc-h2';
import { RawHttpClient } from './raw-http1';
import { RawRedis } from './raw-resp';
import {
  EXECUTE_PATH,
  EXECUTE_WORKFLOW_PATH,
  OWNER_CONNECTIONS,
  OWNER_PATH,
  REDIS_SCRIPT,
  REDIS_TTL_MS,
  TIMEOUT_MS,
  callMetadata,
  executeBody,
  ownerBody,
  ownerHeaders,
  startRequest,
} from './wire';

export interface Variant {
  call: Call;
  close(): Promise<void> | void;
}

const ANSWER_LIMIT = 4 * 1024 * 1024;
let counter = 0;

function expectStatus(status: number, expected: number, body: Buffer): void {
  if (status !== expected) throw new Error(`status ${status}: ${body.toString('utf8', 0, 200)}`);
}

/** undici Pool.request as OwnerClient makes its owner calls: Pool options, per-request timeouts, readCapped, JSON.parse. */
function undiciRequest(target: string): Variant {
  const pool = new Pool(`http://${target}`, { connections: OWNER_CONNECTIONS, keepAliveTimeout: 30_000 });
  return {
    call: async () => {
      const n = ++counter;
      const response = await pool.request({
        method: 'POST',
        path: OWNER_PATH,
        headers: ownerHeaders(`req-${n}`),
        body: ownerBody(n),
        headersTimeout: TIMEOUT_MS,
        bodyTimeout: TIMEOUT_MS,
      });
      const read = await readCapped(response.body, ANSWER_LIMIT, (body) => body.destroy());
      expectStatus(response.statusCode, 200, read.data);
      JSON.parse(read.data.toString('utf8'));
    },
    close: () => pool.close(),
  };
}

/** undici Pool.dispatch with a plain handler object (as OwnerClient's relay does): no Readable per answer. */
function undiciDispatch(target: string): Variant {
  const pool = new Pool(`http://${target}`, { connections: OWNER_CONNECTIONS, keepAliveTimeout: 30_000 });
  return {
    call: () => {
      const n = ++counter;
      return new Promise<void>((resolve, reject) => {
        const chunks: Buffer[] = [];
        let status = 0;
        const handler: Dispatcher.DispatchHandler = {
          onConnect: () => undefined,
          onHeaders: (statusCode) => {
            status = statusCode;
            return true;
          },
          onData: (chunk) => {
            chunks.push(chunk);
            return true;
          },
          onComplete: () => {
            try {
              const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
              expectStatus(status, 200, body);
              JSON.parse(body.toString('utf8'));
              resolve();
            } catch (err) {
              reject(err as Error);
            }
          },
          onError: reject,
        };
        pool.dispatch({ method: 'POST', path: OWNER_PATH, headers: ownerHeaders(`req-${n}`), body: ownerBody(n), headersTimeout: TIMEOUT_MS, bodyTimeout: TIMEOUT_MS }, handler);
      });
    },
    close: () => pool.close(),
  };
}

/** node:http with a keep-alive Agent, the same connection cap, a socket timeout as the deadline. */
function nodeHttp(target: string): Variant {
  const [host, port] = target.split(':') as [string, string];
  const agent = new http.Agent({ keepAlive: true, maxSockets: OWNER_CONNECTIONS });
  return {
    call: () => {
      const n = ++counter;
      const body = ownerBody(n);
      return new Promise<void>((resolve, reject) => {
        const req = http.request(
          {
            host,
            port: Number(port),
            method: 'POST',
            path: OWNER_PATH,
            agent,
            timeout: TIMEOUT_MS,
            headers: { ...ownerHeaders(`req-${n}`), 'content-length': Buffer.byteLength(body) },
          },
          (res) => {
            readCapped(res, ANSWER_LIMIT, (stream) => stream.destroy()).then((read) => {
              expectStatus(res.statusCode ?? 0, 200, read.data);
              JSON.parse(read.data.toString('utf8'));
              resolve();
            }, reject);
          },
        );
        req.on('timeout', () => req.destroy(new Error(`no answer within ${TIMEOUT_MS} ms`)));
        req.on('error', reject);
        req.end(body);
      });
    },
    close: () => agent.destroy(),
  };
}

function rawHttp(target: string): Variant {
  const client = new RawHttpClient(new URL(`http://${target}`), OWNER_CONNECTIONS, TIMEOUT_MS);
  return {
    call: async () => {
      const n = ++counter;
      const answer = await client.post(OWNER_PATH, ownerHeaders(`req-${n}`), ownerBody(n));
      expectStatus(answer.status, 200, answer.body);
      JSON.parse(answer.body.toString('utf8'));
    },
    close: () => client.close(),
  };
}

type Scripted = { spikeLock(key: string, token: string, ttlMs: string): Promise<number> };

/** ioredis as RedisBackend's command connection: createRedis(…, 'commands'), defineCommand (EVALSHA). */
async function ioredis(target: string): Promise<Variant> {
  const redis = createRedis(parseRedisUrl(target), 'commands', { commandTimeoutMs: TIMEOUT_MS, connectTimeoutMs: TIMEOUT_MS });
  redis.on('error', () => undefined);
  redis.defineCommand('spikeLock', { numberOfKeys: 1, lua: REDIS_SCRIPT });
  // enableOfflineQueue is off, as in longrun: nothing may be sent before 'ready'.
  await new Promise<void>((resolve) => (redis.status === 'ready' ? resolve() : redis.once('ready', () => resolve())));
  const scripted = redis as unknown as Scripted;
  return {
    call: async () => {
      const n = ++counter;
      const got = await scripted.spikeLock(`spike:${process.pid}:${n}`, `token-${n}`, REDIS_TTL_MS);
      if (got !== 1) throw new Error(`script returned ${String(got)}`);
    },
    close: () => {
      redis.disconnect();
    },
  };
}

async function rawResp(target: string): Promise<Variant> {
  const redis = new RawRedis(new URL(target), TIMEOUT_MS);
  await redis.connected;
  const sha = await redis.command(['SCRIPT', 'LOAD', REDIS_SCRIPT]);
  if (typeof sha !== 'string') throw new Error('SCRIPT LOAD answered no SHA');
  return {
    call: async () => {
      const n = ++counter;
      const got = await redis.command(['EVALSHA', sha, '1', `spike:${process.pid}:${n}`, `token-${n}`, REDIS_TTL_MS]);
      if (got !== 1) throw new Error(`script returned ${String(got)}`);
    },
    close: () => redis.close(),
  };
}

const executeWorkflow = duoWorkflowClientService['ExecuteWorkflow'] as grpc.MethodDefinition<ClientEvent, Action>;

type ExecuteClient = grpc.Client & { ExecuteWorkflow: (metadata: grpc.Metadata) => grpc.ClientDuplexStream<ClientEvent, Action> };

/**
 * @grpc/grpc-js as ChannelPool and WorkflowStream use it: the pool's channel options and
 * user agent, stack traces off while the call is made, the startRequest written with a
 * callback, the end awaited as both the status and the read side's end.
 */
function grpcJs(target: string): Variant {
  const ServiceClient = grpc.makeGenericClientConstructor(duoWorkflowClientService, 'DuoWorkflow');
  const client = new ServiceClient(target, grpc.credentials.createInsecure(), { ...channelOptions({}), 'grpc.primary_user_agent': userAgent }) as unknown as ExecuteClient;
  return {
    call: () => {
      const n = ++counter;
      const metadata = new grpc.Metadata();
      for (const [key, value] of Object.entries(callMetadata(n))) metadata.set(key, value);
      const stackTraceLimit = Error.stackTraceLimit;
      Error.stackTraceLimit = 0;
      let call: grpc.ClientDuplexStream<ClientEvent, Action>;
      try {
        call = client.ExecuteWorkflow(metadata);
      } finally {
        Error.stackTraceLimit = stackTraceLimit;
      }
      return new Promise<void>((resolve, reject) => {
        let actions = 0;
        let status: grpc.StatusObject | undefined;
        let readEnded = false;
        const finish = (): void => {
          if (status?.code === grpc.status.OK && actions === 1) resolve();
          else reject(new Error(`call ended ${status?.code} ${status?.details} after ${actions} actions`));
        };
        call.on('data', () => {
          actions += 1;
          if (actions === 1) call.end();
        });
        call.on('status', (s: grpc.StatusObject) => {
          status = s;
          if (s.code !== grpc.status.OK || readEnded) finish();
        });
        call.on('end', () => {
          readEnded = true;
          if (status) finish();
        });
        call.on('error', () => undefined);
        call.write({ startRequest: startRequest(n) }, () => undefined);
      });
    },
    close: () => client.close(),
  };
}

/** The same call on a raw node:http2 session, with the same serializers. */
function rawH2(target: string): Variant {
  const channel = new RawGrpcChannel(target, `${userAgent} grpc-node-js/spike`);
  return {
    call: () => {
      const n = ++counter;
      return new Promise<void>((resolve, reject) => {
        let actions = 0;
        const call = channel.open(EXECUTE_WORKFLOW_PATH, callMetadata(n), {
          onMessage: (message) => {
            executeWorkflow.responseDeserialize(message);
            actions += 1;
            if (actions === 1) call.end();
          },
          onEnd: (code, details) => (code === 0 && actions === 1 ? resolve() : reject(new Error(`call ended ${code} ${details} after ${actions} actions`))),
        });
        call.write(executeWorkflow.requestSerialize({ startRequest: startRequest(n) }));
      });
    },
    close: () => channel.close(),
  };
}

/** Pair 4's load: the dispatcher's execute POST through an undici Pool, expecting 202 JSON. */
function undiciExecute(target: string): Variant {
  const pool = new Pool(`http://${target}`, { connections: OWNER_CONNECTIONS, keepAliveTimeout: 30_000 });
  return {
    call: async () => {
      const n = ++counter;
      const response = await pool.request({
        method: 'POST',
        path: EXECUTE_PATH,
        headers: { 'content-type': 'application/json', 'x-request-id': `req-${n}`, 'user-agent': 'spike-dispatcher' },
        body: executeBody(n),
        headersTimeout: TIMEOUT_MS,
        bodyTimeout: TIMEOUT_MS,
      });
      const body = Buffer.from(await response.body.arrayBuffer());
      expectStatus(response.statusCode, 202, body);
      JSON.parse(body.toString('utf8'));
    },
    close: () => pool.close(),
  };
}

/** No wire work: prices the load harness itself (timers, promises, latency bookkeeping). */
function noop(): Variant {
  return { call: () => Promise.resolve(), close: () => undefined };
}

export const variants: Record<string, (target: string) => Variant | Promise<Variant>> = {
  noop,
  'undici-request': undiciRequest,
  'undici-dispatch': undiciDispatch,
  'node-http': nodeHttp,
  'raw-http': rawHttp,
  ioredis,
  'raw-resp': rawResp,
  'grpc-js': grpcJs,
  'raw-h2': rawH2,
  'undici-execute': undiciExecute,
};
