/**
 * A spike's server, in a process of its own (forked through ../ipc.ts) so that its CPU
 * is not the client's. SPIKE_SERVER picks it:
 *
 *  - owner            node:http, reads the POST body, answers 200 with OWNER_ANSWER (pair 1)
 *  - grpc             @grpc/grpc-js server of ExecuteWorkflow: on the first event it sends
 *                     FIRST_ACTION, on the client's half-close it ends OK (pair 3)
 *  - gateway-bare     node:http handler doing the execute route's HTTP work (pair 4)
 *  - gateway-express  express 5 app, two middlewares and one route, the same work (pair 4)
 *
 * Questions: `mark` starts a window, `read` answers this process's CPU and read/write
 * syscalls since the mark.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import express from 'express';
import pino from 'pino';
import { originFormOnly } from '../../src/http/request-target';
import { readBody } from '../../src/http/read-body';
import { requestIdMiddleware, requestIdOf } from '../../src/http/request-id';
import { readCapped } from '../../src/core/read-capped';
import { duoWorkflowService, type Action, type DecodedClientEvent } from '../../src/workflow/contract';
import { serveIpc } from '../processes/ipc';
import { syscallCounts } from './load';
import { EXECUTE_ANSWER_FIELDS, FIRST_ACTION, HOST, OWNER_ANSWER } from './wire';

export interface CpuWindow {
  userMs: number;
  sysMs: number;
  reads: number;
  writes: number;
}

export type ServerQueries = {
  mark: { args: null; result: null };
  read: { args: null; result: CpuWindow };
};

const START_REQUEST_LIMIT = 4 * 1024 * 1024;
const EXECUTE_ROUTE = /^\/api\/v4\/ai\/duo_workflows\/workflows\/([^/]+)\/execute$/;

function listen(server: http.Server): Promise<string> {
  // Keep-alive well past a spike's length: the 5 s default would close the burst
  // connections during the open loop, and the bursts would then pay for new ones.
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve) => server.listen(0, HOST, () => resolve(`${HOST}:${(server.address() as AddressInfo).port}`)));
}

function ownerServer(): Promise<string> {
  const answer = Buffer.from(OWNER_ANSWER);
  const server = http.createServer((req, res) => {
    readCapped(req, START_REQUEST_LIMIT, (body) => body.pause()).then(
      () => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length });
        res.end(answer);
      },
      () => res.destroy(),
    );
  });
  return listen(server);
}

function jsonAnswer(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

let runs = 0;

/** The execute route's HTTP work without a framework: request id, origin-form check, route match, body, 202 JSON. */
function bareGateway(): Promise<string> {
  const server = http.createServer((req, res) => {
    const requestId = requestIdOf(req.headers['x-request-id']);
    res.setHeader('X-Request-Id', requestId);
    const url = req.url ?? '';
    if (!url.startsWith('/')) {
      res.setHeader('Connection', 'close');
      jsonAnswer(res, 400, { error: 'INVALID_REQUEST' });
      return;
    }
    const query = url.indexOf('?');
    const match = req.method === 'POST' ? EXECUTE_ROUTE.exec(query < 0 ? url : url.slice(0, query)) : null;
    if (!match) {
      jsonAnswer(res, 404, { error: 'NOT_FOUND' });
      return;
    }
    const workflowId = decodeURIComponent(match[1] as string);
    readCapped(req, START_REQUEST_LIMIT, (body) => body.pause()).then(
      (read) => {
        JSON.parse(read.data.toString('utf8'));
        runs += 1;
        jsonAnswer(res, 202, { status: EXECUTE_ANSWER_FIELDS.status, workflow_id: workflowId, run_id: `run-${runs}`, accepted_on: EXECUTE_ANSWER_FIELDS.accepted_on });
      },
      () => res.destroy(),
    );
  });
  return listen(server);
}

/** The same work through express 5, with longrun's own two middlewares and body reader. */
function expressGateway(): Promise<string> {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.use(requestIdMiddleware);
  app.use(originFormOnly(pino({ level: 'silent' })));
  app.post('/api/v4/ai/duo_workflows/workflows/:workflow_id/execute', async (req, res) => {
    JSON.parse((await readBody(req, res)).toString('utf8'));
    runs += 1;
    res.status(202).json({ status: EXECUTE_ANSWER_FIELDS.status, workflow_id: req.params['workflow_id'], run_id: `run-${runs}`, accepted_on: EXECUTE_ANSWER_FIELDS.accepted_on });
  });
  app.use((_req, res) => {
    res.status(404).json({ error: 'NOT_FOUND' });
  });
  return listen(http.createServer(app));
}

async function grpcServer(): Promise<string> {
  const server = new grpc.Server();
  server.addService(duoWorkflowService, {
    ExecuteWorkflow: (call: grpc.ServerDuplexStream<DecodedClientEvent, Action>) => {
      let answered = false;
      call.on('data', () => {
        if (answered) return;
        answered = true;
        call.write(FIRST_ACTION);
      });
      call.on('end', () => call.end());
      call.on('error', () => undefined);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${HOST}:0`, grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
  return `${HOST}:${port}`;
}

const servers: Record<string, () => Promise<string>> = {
  owner: ownerServer,
  grpc: grpcServer,
  'gateway-bare': bareGateway,
  'gateway-express': expressGateway,
};

async function main(): Promise<void> {
  const role = process.env['SPIKE_SERVER'] ?? '';
  const start = servers[role];
  if (!start) throw new Error(`SPIKE_SERVER must be one of ${Object.keys(servers).join(', ')}, got ${JSON.stringify(role)}`);
  const address = await start();
  let mark = process.cpuUsage();
  let io = syscallCounts();
  serveIpc<ServerQueries>(address, {
    mark: () => {
      io = syscallCounts();
      mark = process.cpuUsage();
      return null;
    },
    read: () => {
      const used = process.cpuUsage(mark);
      const now = syscallCounts();
      return {
        userMs: used.user / 1_000,
        sysMs: used.system / 1_000,
        reads: (now?.reads ?? Number.NaN) - (io?.reads ?? Number.NaN),
        writes: (now?.writes ?? Number.NaN) - (io?.writes ?? Number.NaN),
      };
    },
  });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
