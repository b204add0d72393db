/**
 * The segment-end callback's token, checked as Rails' Gitlab::Workhorse.verify_api_request!
 * checks a Gitlab-Workhorse-Api-Request: HS256 with the shared secret, iss
 * "gitlab-workhorse", an `iat` present and at most 90 s old (API_REQUEST_JWT_VALIDITY), so a
 * leaked token cannot be replayed for ever. Tokens signed here with jose, no gateway.
 */
import { randomBytes } from 'node:crypto';
import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { GATEWAY_TOKEN_MAX_AGE_S, SegmentEndRejected, verifySegmentEnd } from '../src/index';
import { verifyGatewayToken } from '../src/jwt';

const secret = randomBytes(32);
const nowS = (): number => Math.floor(Date.now() / 1_000);
const body = JSON.stringify({ workflow_id: '42', run_id: 'r-1', reason: 'run_limit', segment_duration_s: 1, actions: 2, in_flight: [] });

function token(claims: Record<string, unknown>, key: Uint8Array = secret): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(key);
}

const callback = async (claims: Record<string, unknown>, options?: { maxAgeS?: number }) =>
  verifySegmentEnd(secret, { headers: { 'gitlab-workhorse-api-request': await token(claims) }, body }, options);

describe("the callback token's age (Rails: at most 90 s since iat)", () => {
  it('takes a token issued now, or 89 s ago', async () => {
    expect(GATEWAY_TOKEN_MAX_AGE_S).toBe(90);
    await expect(callback({ iss: 'gitlab-workhorse', iat: nowS() })).resolves.toMatchObject({ workflow_id: '42', reason: 'run_limit' });
    await expect(callback({ iss: 'gitlab-workhorse', iat: nowS() - 89 })).resolves.toMatchObject({ run_id: 'r-1' });
  });

  it.each([
    ['issued 91 s ago', { iss: 'gitlab-workhorse', iat: -91 }],
    ['issued an hour ago, with an exp still ahead', { iss: 'gitlab-workhorse', iat: -3_600, exp: 3_600 }],
    ['without an iat', { iss: 'gitlab-workhorse' }],
    ['issued 2 minutes in the future', { iss: 'gitlab-workhorse', iat: 120 }],
    ['with an iat that is not a number', { iss: 'gitlab-workhorse', iat: 'now' }],
  ])('refuses a token %s: 401', async (_why, given) => {
    // Times are given relative to now.
    const claims: Record<string, unknown> = { ...given };
    for (const name of ['iat', 'exp']) if (typeof claims[name] === 'number') claims[name] = nowS() + (claims[name] as number);
    const relative = claims;
    const refused = await callback(relative).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(SegmentEndRejected);
    expect(refused).toMatchObject({ status: 401 });
  });

  it('the age is the option’s when given: a longer window, or any age with Infinity', async () => {
    const old = { iss: 'gitlab-workhorse', iat: nowS() - 600 };
    await expect(callback(old)).rejects.toMatchObject({ status: 401 });
    await expect(callback(old, { maxAgeS: 900 })).resolves.toMatchObject({ workflow_id: '42' });
    await expect(callback(old, { maxAgeS: Infinity })).resolves.toMatchObject({ workflow_id: '42' });
    await expect(callback({ iss: 'gitlab-workhorse', iat: nowS() - 20 }, { maxAgeS: 10 })).rejects.toMatchObject({ status: 401 });
    await expect(callback(old, { maxAgeS: 0 })).rejects.toBeInstanceOf(RangeError);
  });

  it('the age is measured without the 60 s skew tolerance, at the edge as Rails measures it', async () => {
    const t = await token({ iss: 'gitlab-workhorse', iat: 1_000_000 });
    expect(await verifyGatewayToken(secret, t, { nowMs: 1_000_090_000 })).toBe(true);
    expect(await verifyGatewayToken(secret, t, { nowMs: 1_000_091_000 })).toBe(false);
    // A gateway clock up to 60 s ahead of the owner's is tolerated.
    expect(await verifyGatewayToken(secret, t, { nowMs: 999_940_000 })).toBe(true);
    expect(await verifyGatewayToken(secret, t, { nowMs: 999_939_000 })).toBe(false);
  });

  it('still checks the signature and the issuer first', async () => {
    await expect(
      verifySegmentEnd(secret, { headers: { 'gitlab-workhorse-api-request': await token({ iss: 'gitlab-workhorse', iat: nowS() }, randomBytes(32)) }, body }),
    ).rejects.toMatchObject({ status: 401 });
    await expect(callback({ iss: 'gitlab', iat: nowS() })).rejects.toMatchObject({ status: 401 });
  });
});
