/**
 * The stop route's body (src/http/stop-request.ts), read with the zod schema docs/openapi.json
 * gives for it: the reason it names, USER_STOP when it names none, and the two 400s with the
 * messages the route has always answered with.
 */
import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/core/errors';
import { stopReasonOf } from '../../src/http/stop-request';

const read = (text: string): string => stopReasonOf(Buffer.from(text));

function refusal(text: string): GatewayError {
  try {
    read(text);
  } catch (err) {
    if (err instanceof GatewayError) return err;
    throw err;
  }
  throw new Error(`${text} was accepted`);
}

describe('a stop body', () => {
  it('names the reason the run is stopped with; none (empty, {}, a JSON value that is no object) is USER_STOP', () => {
    expect(read('{"reason":"CUSTOM_STOP"}')).toBe('CUSTOM_STOP');
    expect(read(`{"reason":"A${'B'.repeat(63)}"}`)).toBe(`A${'B'.repeat(63)}`);
    expect(read('{"reason":"X","other":1}')).toBe('X');
    for (const none of ['', '{}', 'null', '5', '"TEXT"', '[1]']) expect(read(none), none).toBe('USER_STOP');
  });

  it('is INVALID_REQUEST when it is not JSON', () => {
    const error = refusal('{reason');
    expect([error.code, error.message]).toEqual(['INVALID_REQUEST', 'body must be JSON']);
  });

  it('is INVALID_REQUEST naming the rule when the reason is not a token: wrong case, too long, empty, not a string, null', () => {
    for (const body of ['{"reason":"lower"}', `{"reason":"A${'B'.repeat(64)}"}`, '{"reason":""}', '{"reason":5}', '{"reason":null}', '{"reason":["A"]}', '{"reason":"1ABC"}']) {
      const error = refusal(body);
      expect([error.code, error.message], body).toEqual(['INVALID_REQUEST', 'reason must match [A-Z][A-Z0-9_]{0,63}']);
    }
  });
});
