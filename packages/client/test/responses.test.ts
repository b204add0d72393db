/**
 * How the client reads answers the gateway rarely gives, without a gateway: an error body
 * with its code, Retry-After as delta-seconds or as an HTTP date.
 */
import { describe, expect, it } from 'vitest';
import { errorOf, retryAfterOf } from '../src/responses';

describe('answers the gateway rarely gives', () => {
  it('are read the same way (500 INTERNAL, Retry-After as a date)', () => {
    const answer = { status: 500, headers: {}, text: '{"error":{"code":"INTERNAL","message":"internal error","retryable":true}}', endpoint: 'http://x', requestId: 'r' };
    expect(errorOf(answer)).toMatchObject({ code: 'INTERNAL', status: 500, retryable: true, requestId: 'r' });
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterOf({ 'retry-after': 'Thu, 01 Jan 2026 00:00:30 GMT' }, now)).toBe(30);
    expect(retryAfterOf({ 'retry-after': '7' }, now)).toBe(7);
    expect(retryAfterOf({ 'retry-after': 'soon' }, now)).toBeUndefined();
  });

  it('an owner refusal is final, but its 429 (a rate limit) is retried after its Retry-After', () => {
    const refusal = (status: number, headers: Record<string, string> = {}) => ({
      status,
      headers: { 'x-longrun-error-code': 'PREAUTH_DENIED', ...headers },
      text: '{"message":"refused"}',
      endpoint: 'http://x',
      requestId: 'r',
    });
    expect(errorOf(refusal(403))).toMatchObject({ code: 'PREAUTH_DENIED', status: 403, retryable: false });
    expect(errorOf(refusal(404))).toMatchObject({ code: 'PREAUTH_DENIED', status: 404, retryable: false });
    expect(errorOf(refusal(429, { 'retry-after': '60' }))).toMatchObject({ code: 'PREAUTH_DENIED', status: 429, retryable: true, retryAfterS: 60 });
  });
});
