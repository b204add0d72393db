/**
 * The execute route is served two ways (src/http/main-app.ts): the target as dispatchers
 * write it skips express, and every other form of it (an encoded id, a trailing slash,
 * another case) goes through express's route. A caller must not be able to tell which:
 * same status, same headers, same body, same preauth forwarded, same log line.
 */
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { plainExecuteWorkflowId } from '../../src/http/execute-route';
import { scenarioMetadata } from '../../sandbox/scenario';
import { startStack, type Stack } from '../../stack';

let stack: Stack | undefined;

afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const ROUTE = '/api/v4/ai/duo_workflows/workflows';
const body = JSON.stringify({ goal: 'forms', workflowMetadata: scenarioMetadata([{ op: 'checkpoint', text: 'done' }, { op: 'end' }]) });

/** What a caller sees of one execute: everything but the Date header. */
async function post(path: string, requestBody: string, requestId: string) {
  const res = await request(`${stack!.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': requestId }, body: requestBody });
  const { date, ...headers } = res.headers;
  expect(date).toBeDefined();
  return { status: res.statusCode, headers, text: await res.body.text() };
}

describe('the target forms of the execute route', () => {
  it('reads the workflow id of the plain form only', () => {
    expect(plainExecuteWorkflowId('POST', `${ROUTE}/100/execute`)).toBe('100');
    expect(plainExecuteWorkflowId('POST', `${ROUTE}/a-b_c.d~e/execute?detached=true`)).toBe('a-b_c.d~e');
    for (const url of [
      `${ROUTE}/%31/execute`,
      `${ROUTE}/100/execute/`,
      `${ROUTE}/100/EXECUTE`,
      `${ROUTE}/100/executes`,
      `${ROUTE}//execute`,
      `${ROUTE}/1/2/execute`,
      `http://h${ROUTE}/1/execute`,
    ]) {
      expect(plainExecuteWorkflowId('POST', url), url).toBeUndefined();
    }
    expect(plainExecuteWorkflowId('GET', `${ROUTE}/100/execute`)).toBeUndefined();
  });

  it('answers a stream, and an error, the same whichever way it is served', async () => {
    stack = await startStack({ preauth: { detached: false } });
    const plain = await post(`${ROUTE}/100/execute`, body, 'form-plain');
    // An encoded id is read by express's router (the owner simulator, like Rails, decodes it too).
    const routed = [await post(`${ROUTE}/%31%30%30/execute`, body, 'form-encoded'), await post(`${ROUTE}/1%300/execute`, body, 'form-partly')];
    expect(plain.status).toBe(200);
    expect(plain.headers['content-type']).toBe('application/x-ndjson');
    expect(plain.text).toContain('newCheckpoint');
    for (const [i, other] of routed.entries()) {
      expect(other.status).toBe(plain.status);
      expect({ ...other.headers, 'x-request-id': undefined }).toEqual({ ...plain.headers, 'x-request-id': undefined });
      expect(other.headers['x-request-id']).toBe(['form-encoded', 'form-partly'][i]);
      expect(other.text).toBe(plain.text);
    }
    // Each preauth asked for the target as the caller wrote it.
    expect(stack.owner.preauths.map((p) => p.path)).toEqual([`${ROUTE}/100/execute`, `${ROUTE}/%31%30%30/execute`, `${ROUTE}/1%300/execute`]);

    const plainError = await post(`${ROUTE}/100/execute`, '{nope', 'error-plain');
    const routedError = await post(`${ROUTE}/%31%30%30/execute`, '{nope', 'error-encoded');
    expect(plainError.status).toBe(400);
    expect(plainError.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(plainError.headers['content-length']).toBe(String(Buffer.byteLength(plainError.text)));
    expect(JSON.parse(plainError.text).error.code).toBe('INVALID_REQUEST');
    expect({ ...routedError, headers: { ...routedError.headers, 'x-request-id': undefined } }).toEqual({
      ...plainError,
      headers: { ...plainError.headers, 'x-request-id': undefined },
    });

    // One execute log line each, naming the path's workflow id (decoded on express's side).
    const lines = stack
      .logs()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line['msg'] === 'execute request');
    expect(lines.map((line) => [line['request_id'], line['workflow_id'], line['status']])).toEqual([
      ['form-plain', '100', 200],
      ['form-encoded', '100', 200],
      ['form-partly', '100', 200],
      ['error-plain', '100', 400],
      ['error-encoded', '100', 400],
    ]);
  });
});
