/**
 * What callers ask of a stack's gateway over HTTP, wherever it runs: an execute (as Workhorse
 * forwards it), the owner's stop and run record (docs/spec.md §6), its /metrics.
 */
import { request, type Dispatcher } from 'undici';
import { signOwnerJwt } from '../src/core/jwt';
import { scenarioMetadata, type Step } from '../sandbox/scenario';
import { testSecret } from './secret';

export interface ExecuteOptions {
  steps?: Step[];
  body?: unknown;
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
  query?: string;
  signal?: AbortSignal;
}

export interface TextReply {
  status: number;
  headers: Dispatcher.ResponseData['headers'];
  text: string;
}

export interface JsonReply {
  status: number;
  body: Record<string, unknown>;
}

/** POST …/execute with a scenario's steps (default: one checkpoint, then the end) as its metadata; the response as it comes. */
export function execute(url: string, workflowId: string, options: ExecuteOptions = {}): Promise<Dispatcher.ResponseData> {
  const body =
    options.rawBody ??
    JSON.stringify(options.body ?? { goal: 'test goal', workflowMetadata: scenarioMetadata(options.steps ?? [{ op: 'checkpoint', text: 'done' }, { op: 'end' }]) });
  return request(`${url}/api/v4/ai/duo_workflows/workflows/${workflowId}/execute${options.query ?? ''}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...options.headers },
    body,
    signal: options.signal,
  });
}

/** execute, read whole. */
export async function executeText(url: string, workflowId: string, options?: ExecuteOptions): Promise<TextReply> {
  const res = await execute(url, workflowId, options);
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

/** execute with only `steps` in the body (no goal), its answer parsed as JSON (`{ raw }` when it is not). */
export async function executeJson(url: string, workflowId: string, steps: Step[]): Promise<JsonReply & { headers: Dispatcher.ResponseData['headers'] }> {
  const res = await execute(url, workflowId, { body: { workflowMetadata: scenarioMetadata(steps) } });
  return { status: res.statusCode, headers: res.headers, body: await json(res) };
}

/**
 * POST /internal/workflows/:id/stop. `token`: undefined signs an owner token with `secret`;
 * '' sends no Authorization; anything else is sent as the Authorization header.
 */
export async function stopRun(url: string, secret: Buffer, workflowId: string, token?: string, body?: unknown): Promise<JsonReply> {
  const res = await request(`${url}/internal/workflows/${workflowId}/stop`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token === undefined ? { authorization: `Bearer ${await ownerJwt(workflowId, secret)}` } : token ? { authorization: token } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.statusCode, body: await json(res) };
}

/** GET /internal/workflows/:id/run with an owner token signed with `secret`. */
export async function runRecord(url: string, secret: Buffer, workflowId: string): Promise<JsonReply> {
  const res = await request(`${url}/internal/workflows/${workflowId}/run`, { headers: { authorization: `Bearer ${await ownerJwt(workflowId, secret)}` } });
  return { status: res.statusCode, body: await json(res) };
}

/** GET /metrics of an ops listener. */
export async function metricsText(opsUrl: string): Promise<string> {
  return (await request(`${opsUrl}/metrics`)).body.text();
}

/** An owner token for the internal routes of `workflowId` (docs/spec.md §6), signed with `secret` (default the test secret). */
export async function ownerJwt(workflowId: string, secret: Buffer = testSecret): Promise<string> {
  return signOwnerJwt(secret, workflowId);
}

/** ndjson lines of a blocking response (empty keepalive lines included as ''). */
export function ndjsonLines(text: string): string[] {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

async function json(res: Dispatcher.ResponseData): Promise<Record<string, unknown>> {
  const text = await res.body.text();
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { raw: text };
  }
}
