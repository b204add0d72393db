/**
 * The logger (docs/spec.md §7): JSON lines at LONGRUN_LOG_LEVEL, and secrets redacted at the
 * logger level — whatever a code path hands it. Each case logs secrets the way a careless
 * caller might and searches the raw bytes written.
 */
import { createHmac } from 'node:crypto';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, type Logger } from '../../src/core/log';

function capture(level = 'debug'): { logger: Logger; raw: () => string; lines: () => Array<Record<string, unknown>> } {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(Buffer.from(chunk));
      cb();
    },
  });
  const logger = createLogger(level, sink);
  const raw = (): string => Buffer.concat(chunks).toString('utf8');
  return {
    logger,
    raw,
    lines: () =>
      raw()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

/** An HS256 JWT as longrun signs them (docs/spec.md §2). */
const jwt = ((): string => {
  const part = (o: object): string => Buffer.from(JSON.stringify(o)).toString('base64url');
  const signingInput = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ iss: 'gitlab-workhorse', iat: 1_700_000_000 })}`;
  return `${signingInput}.${createHmac('sha256', 'longrun-test-secret-0123456789ab').update(signingInput).digest('base64url')}`;
})();

/** Every value here is a secret: none may appear in the bytes written. */
const secret = {
  bearer: 'bearer-value-a1b2c3d4e5',
  cookie: 'session-cookie-f6e5d4c3b2',
  setCookie: 'set-cookie-value-99aa88bb',
  oauth: 'oauth-token-value-1234abcd',
  customToken: 'x-gitlab-custom-7788ccdd',
  privateToken: 'private-token-5566eeff',
  basic: Buffer.from('user:basic-password-0011').toString('base64'),
  pat: 'glpat-AbCdEfGhIjKlMnOpQrSt',
};

const secretHeaders = (): Record<string, string | string[]> => ({
  authorization: `Bearer ${secret.bearer}`,
  cookie: `_gitlab_session=${secret.cookie}`,
  'set-cookie': [`a=${secret.setCookie}; HttpOnly`],
  'gitlab-workhorse-api-request': jwt,
  'x-gitlab-oauth-token': secret.oauth,
  'X-Gitlab-Some-Custom-Token-Header': secret.customToken,
  'private-token': secret.privateToken,
  'x-request-id': 'keep-this-request-id',
  'content-type': 'application/json',
});

function expectClean(raw: string): void {
  expect(raw.length).toBeGreaterThan(0);
  for (const [name, value] of Object.entries({ ...secret, jwt })) expect(raw, `${name} leaked`).not.toContain(value);
  expect(raw).not.toMatch(/eyJ[\w-]+\.[\w-]+/);
}

describe('secrets never reach the log bytes', () => {
  it('a headers object: Authorization, cookies, the JWT header and every x-gitlab-*token* header', () => {
    const { logger, raw, lines } = capture();
    logger.info({ headers: secretHeaders() }, 'headers');
    logger.info({ req: { headers: secretHeaders() } }, 'request');
    logger.info({ metadata: secretHeaders() }, 'grpc metadata');
    expectClean(raw());
    for (const line of lines()) {
      const headers = (line['headers'] ?? (line['req'] as Record<string, unknown> | undefined)?.['headers'] ?? line['metadata']) as Record<string, unknown>;
      // Non-secret headers survive; secret ones are marked, not dropped silently.
      expect(headers['x-request-id']).toBe('keep-this-request-id');
      expect(headers['content-type']).toBe('application/json');
      expect(headers['authorization']).toBe('[redacted]');
      expect(headers['X-Gitlab-Some-Custom-Token-Header']).toBe('[redacted]');
    }
  });

  it('secret-named keys anywhere in the object, at any depth and inside arrays', () => {
    const { logger, raw } = capture();
    logger.info(
      {
        preauth: { DuoWorkflow: { Service: { URI: 'wf:50052', Headers: { 'x-gitlab-oauth-token': secret.oauth } } } },
        calls: [{ upstream: { headers: secretHeaders() } }],
        private_token: secret.privateToken,
        lock_token: secret.customToken,
      },
      'nested',
    );
    expectClean(raw());
    expect(raw()).toContain('wf:50052');
  });

  it('a JWT, a Bearer or Basic credential or a GitLab token in a message or an error, whatever the key', () => {
    const { logger, raw } = capture();
    logger.warn(`owner rejected ${jwt} for Bearer ${secret.bearer}`);
    logger.warn({ detail: `Authorization: Basic ${secret.basic}`, note: `token ${secret.pat} was used` }, 'free text');
    logger.error({ err: new Error(`upstream said: Bearer ${secret.bearer} / ${jwt}`) }, 'failed');
    const withHeaders = Object.assign(new Error('request failed'), { headers: { authorization: `Bearer ${secret.bearer}`, 'x-gitlab-oauth-token': secret.oauth } });
    logger.error({ err: withHeaders }, 'failed with headers');
    logger.error({ err: new Error('wrapped', { cause: new Error(`cause carries ${jwt}`) }) }, 'cause');
    expectClean(raw());
    expect(raw()).toContain('request failed');
  });

  it('the password of a URL and credential-named query parameters, in any field, message or error', () => {
    const { logger, raw } = capture();
    logger.warn({ redis: 'redis://app:url-pass-1a2b@10.0.0.1:6379/0' }, 'connecting');
    logger.warn(`cannot reach rediss+sentinel://:url-pass-3c4d@s1,s2/m?db=1&sentinel_password=url-pass-5e6f`);
    logger.error({ err: new Error('connect to http://user:url-pass-7a8b@owner.example/api failed') }, 'failed');
    const text = raw();
    expect(text).not.toMatch(/url-pass-/);
    expect(text).toContain('redis://app:***@10.0.0.1:6379/0');
    expect(text).toContain('rediss+sentinel://:***@s1,s2/m?db=1&sentinel_password=***');
    expect(text).toContain('http://user:***@owner.example/api');
  });

  it('does not modify the object that was logged', () => {
    const { logger } = capture();
    const headers = secretHeaders();
    logger.info({ headers }, 'headers');
    expect(headers['authorization']).toBe(`Bearer ${secret.bearer}`);
    expect(headers['x-gitlab-oauth-token']).toBe(secret.oauth);
  });

  it('leaves ordinary fields alone', () => {
    const { logger, lines } = capture();
    logger.info({ request_id: 'r-1', workflow_id: '42', run_id: 'a-b', transport: 'detached', reason: 'finished', duration_ms: 12, actions: 3 }, 'run ended');
    expect(lines()[0]).toMatchObject({
      level: 'info',
      service: 'longrun',
      msg: 'run ended',
      request_id: 'r-1',
      workflow_id: '42',
      run_id: 'a-b',
      transport: 'detached',
      reason: 'finished',
      duration_ms: 12,
      actions: 3,
    });
    expect(lines()[0]?.['time']).toMatch(/^\d{4}-\d\d-\d\dT/);
  });
});

describe('LONGRUN_LOG_LEVEL', () => {
  it('lines below the level are not written', () => {
    const { logger, lines } = capture('warn');
    logger.debug('debug line');
    logger.info('info line');
    logger.warn('warn line');
    logger.error('error line');
    expect(lines().map((l) => [l['level'], l['msg']])).toEqual([
      ['warn', 'warn line'],
      ['error', 'error line'],
    ]);
  });

  it('silent writes nothing', () => {
    const { logger, raw } = capture('silent');
    logger.error('nothing');
    expect(raw()).toBe('');
  });
});
