/**
 * Least privilege on the owner → longrun routes (docs/spec.md §6): a token names one workflow
 * (`workflow_id`, a string equal to the path's id) and lives at most five minutes
 * (`iat` and `exp` required, exp − iat ≤ 300 s). Anything else is a 401 without detail,
 * and a refused stop leaves the run untouched — checked at the workflow service, which
 * would have received the stopWorkflow.
 */
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { OWNER_ISSUER, signOwnerJwt, WORKHORSE_ISSUER, type OwnerTokenClaims } from '../../src/core/jwt';
import { testSecret, wrongSecret } from '../../stack/secret';
import { startStack, type Stack } from '../../stack';

let stack: Stack;
const WORKFLOW = '900';

beforeAll(async () => {
  stack = await startStack({ preauth: { detached: true } });
  expect((await stack.executeText(WORKFLOW, { steps: [{ op: 'checkpoint' }, { op: 'hang' }] })).status).toBe(202);
});
afterAll(async () => {
  await stack.close();
});

const now = (): number => Math.floor(Date.now() / 1000);

async function call(method: 'GET' | 'POST', path: string, authorization: string | undefined): Promise<{ status: number; body: unknown }> {
  const res = await request(`${stack.url}/internal${path}`, { method, headers: authorization === undefined ? {} : { authorization } });
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? (JSON.parse(text) as unknown) : undefined };
}

const unauthorized = { error: { code: 'UNAUTHORIZED', message: 'unauthorized', retryable: false } };

describe('refused tokens: 401 without detail, and the run goes on', () => {
  const bearer = async (claims: OwnerTokenClaims, secret: Uint8Array = testSecret): Promise<string> => `Bearer ${await signOwnerJwt(secret, WORKFLOW, claims)}`;

  it.each<[string, () => Promise<string | undefined>]>([
    ['no Authorization header', async () => undefined],
    ['not a bearer token', async () => 'Basic YTpi'],
    ['not a JWT', async () => 'Bearer not.a.jwt'],
    ['a token for another workflow', async () => bearer({ workflow_id: '901' })],
    ['a token for a workflow whose id merely starts the same', async () => bearer({ workflow_id: '9000' })],
    ['no workflow_id claim', async () => bearer({ workflow_id: undefined })],
    ['workflow_id as a number', async () => bearer({ workflow_id: 900 })],
    ['no exp', async () => bearer({ exp: null })],
    ['no iat', async () => bearer({ iat: null })],
    ['exp more than five minutes after iat', async () => bearer({ iat: now(), exp: now() + 301 })],
    ['exp before iat', async () => bearer({ iat: now(), exp: now() - 1 })],
    ['expired (past the clock tolerance)', async () => bearer({ iat: now() - 200, exp: now() - 100 })],
    ['issued in the future (past the clock tolerance)', async () => bearer({ iat: now() + 120, exp: now() + 180 })],
    ['issued by the gateway instead of the owner', async () => bearer({ iss: WORKHORSE_ISSUER })],
    ['signed with another secret', async () => bearer({}, wrongSecret)],
    [
      'signed with HS512',
      async () => `Bearer ${await new SignJWT({ workflow_id: WORKFLOW, iss: OWNER_ISSUER, iat: now(), exp: now() + 60 }).setProtectedHeader({ alg: 'HS512' }).sign(testSecret)}`,
    ],
  ])('%s', async (_label, authorization) => {
    const header = await authorization();
    const stop = await call('POST', `/workflows/${WORKFLOW}/stop`, header);
    expect(stop).toEqual({ status: 401, body: unauthorized });
    const record = await call('GET', `/workflows/${WORKFLOW}/run`, header);
    expect(record).toEqual({ status: 401, body: unauthorized });
    expect(stack.workflow.callsFor(WORKFLOW)[0]?.stopReasons).toEqual([]);
  });

  it('any other path under /internal answers the same 401, token or not', async () => {
    expect(await call('GET', '/anything', undefined)).toEqual({ status: 401, body: unauthorized });
    expect(await call('GET', '/workflows', await bearer({}))).toEqual({ status: 401, body: unauthorized });
  });
});

describe('a token for this workflow', () => {
  it('reads the run record (a five-minute token is the longest accepted)', async () => {
    const token = await signOwnerJwt(testSecret, WORKFLOW, { iat: now(), exp: now() + 300 });
    const record = await call('GET', `/workflows/${WORKFLOW}/run`, `Bearer ${token}`);
    expect(record.status).toBe(200);
    expect(record.body).toMatchObject({ workflow_id: WORKFLOW, transport: 'detached', state: 'running' });
  });

  it('cannot be used on another workflow, even one with a run in flight', async () => {
    expect((await stack.executeText('902', { steps: [{ op: 'checkpoint' }, { op: 'hang' }] })).status).toBe(202);
    const forOther = await signOwnerJwt(testSecret, WORKFLOW);
    expect((await call('POST', '/workflows/902/stop', `Bearer ${forOther}`)).status).toBe(401);
    expect(stack.workflow.callsFor('902')[0]?.stopReasons).toEqual([]);
  });

  it('stops the run', async () => {
    const token = await signOwnerJwt(testSecret, WORKFLOW);
    const stop = await call('POST', `/workflows/${WORKFLOW}/stop`, `Bearer ${token}`);
    expect(stop).toMatchObject({ status: 202, body: { status: 'stop_requested', workflow_id: WORKFLOW } });
    await stack.workflow.waitFor(() => (stack.workflow.callsFor(WORKFLOW)[0]?.stopReasons.length ?? 0) > 0, 10_000, 'the stop');
    expect(stack.workflow.callsFor(WORKFLOW)[0]?.stopReasons).toEqual(['USER_STOP']);
  });
});
