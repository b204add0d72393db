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
});
