/**
 * LONGRUN_REDIS_URL (docs/spec.md §5): the forms accepted, what each parses into, the ioredis
 * options built from it, the forms refused (with a message that names the problem and
 * never echoes a credential), and URL masking for whatever is printed or logged.
 */
import { describe, expect, it } from 'vitest';
import { clusterOptions, redisOptions, sentinelOptions } from '../../src/redis/connection';
import { RedisUrlError, describeRedisTarget, parseRedisUrl, type SentinelRedisTarget } from '../../src/redis/url';
import { maskUrl, scrubLine } from '../../src/core/log';

const settings = { commandTimeoutMs: 2_000, connectTimeoutMs: 2_000 };

function sentinel(raw: string): SentinelRedisTarget {
  const target = parseRedisUrl(raw);
  if (target.mode !== 'sentinel') throw new Error(`expected a Sentinel target for ${raw}`);
  return target;
}

function refusal(raw: string): string {
  try {
    parseRedisUrl(raw);
  } catch (err) {
    if (err instanceof RedisUrlError) return err.message;
    throw err;
  }
  throw new Error(`expected ${raw} to be refused`);
}

describe('redis+sentinel:// URLs', () => {
  it('the SPEC form: Sentinels, master name, db and the data nodes’ password', () => {
    expect(parseRedisUrl('redis+sentinel://:p4ss@10.0.0.1:26379,10.0.0.2:26380/mymaster?db=2')).toEqual({
      mode: 'sentinel',
      sentinels: [
        { host: '10.0.0.1', port: 26_379 },
        { host: '10.0.0.2', port: 26_380 },
      ],
      masterName: 'mymaster',
      db: 2,
      username: undefined,
      password: 'p4ss',
      sentinelUsername: undefined,
      sentinelPassword: undefined,
      tls: false,
    });
  });

  it('defaults: port 26379, db 0, no credentials, no TLS', () => {
    expect(sentinel('redis+sentinel://sentinel-0.redis.svc/primary')).toMatchObject({
      sentinels: [{ host: 'sentinel-0.redis.svc', port: 26_379 }],
      masterName: 'primary',
      db: 0,
      username: undefined,
      password: undefined,
      tls: false,
    });
  });

  it('an ACL user, percent-encoded reserved characters, IPv6 Sentinels, Sentinel credentials and TLS', () => {
    expect(sentinel('rediss+sentinel://app%2Dr:a%40b%3Ac%2Fd@[::1],[fd00::2]:26380/name%2Ex?sentinel_username=mon&sentinel_password=s%26p&db=15')).toEqual({
      mode: 'sentinel',
      sentinels: [
        { host: '::1', port: 26_379 },
        { host: 'fd00::2', port: 26_380 },
      ],
      masterName: 'name.x',
      db: 15,
      username: 'app-r',
      password: 'a@b:c/d',
      sentinelUsername: 'mon',
      sentinelPassword: 's&p',
      tls: true,
    });
  });

  it('a password holding an unencoded @ is read up to the last @ before the hosts', () => {
    expect(sentinel('redis+sentinel://:a@b@s1/m').password).toBe('a@b');
  });

  it.each([
    ['redis+sentinel://:pw@s1:26379', /master name is missing/],
    ['redis+sentinel://:pw@s1:26379/', /master name is missing/],
    ['redis+sentinel://:pw@s1/m/2', /master name alone.*\?db=N/],
    ['redis+sentinel://:pw@/m', /no Sentinel host/],
    ['redis+sentinel://:pw@s1,,s2/m', /Sentinel 2 is empty/],
    ['redis+sentinel://:pw@s1,/m', /Sentinel 2 is empty/],
    ['redis+sentinel://:pw@s1:0/m', /Sentinel 1 has an invalid port/],
    ['redis+sentinel://:pw@s1:65536/m', /Sentinel 1 has an invalid port/],
    ['redis+sentinel://:pw@s1,s2:port/m', /Sentinel 2 has an invalid port/],
    ['redis+sentinel://:pw@s 1/m', /Sentinel 1 is not host\[:port\]/],
    ['redis+sentinel://:pw@::1/m', /Sentinel 1 is not host\[:port\]/],
    ['redis+sentinel://:pw@s1/m?db=x', /db must be a non-negative integer/],
    ['redis+sentinel://:pw@s1/m?db=-1', /db must be a non-negative integer/],
    ['redis+sentinel://:pw@s1/m?db=1&db=2', /db is given twice/],
    ['redis+sentinel://:pw@s1/m?password=x', /unknown option "password" \(accepted: db, sentinel_username, sentinel_password\)/],
    ['redis+sentinel://:pw@s1/m?pw9x=1', /an unknown option \(accepted/],
    ['redis+sentinel://:pw@s1/m#x', /fragment/],
    ['redis+sentinel://:p/w@s1/m', /reserved character.*percent-encode/],
    ['redis+sentinel://pw@s1/m', /no ':'/],
    ['redis+sentinel://:%zz@s1/m', /password is not valid percent-encoding/],
    ['redis+sentinel://s1/has%20space', /master name/],
    ['redis+cluster://s1/m', /unsupported scheme "redis\+cluster:\/\/"/],
    ['http://s1/m', /unsupported scheme "http:\/\/"/],
    ['s1:26379', /not a URL/],
    ['redis://:pw@host:99999', /not a valid URL/],
    ['redis://:pw@host/db1', /path must be a database number/],
    ['redis://', /not a valid URL|no host/],
  ])('refuses %s: %s', (raw, problem) => {
    const message = refusal(raw);
    expect(message).toMatch(problem);
    // The problem never quotes the value: ConfigError shows it, masked.
    expect(message).not.toContain('pw');
  });
});

describe('single-server URLs', () => {
  it.each(['redis://127.0.0.1:6379', 'redis://:pw@redis/3', 'rediss://user:pw@redis.example:6380/0', 'redis://redis?family=6'])('%s is handed to ioredis unchanged', (raw) => {
    expect(parseRedisUrl(raw)).toEqual({ mode: 'standalone', url: raw });
  });
});

describe('Redis Cluster seed URLs (LONGRUN_REDIS_KEYS=cluster)', () => {
  const cluster = (raw: string) => parseRedisUrl(raw, { cluster: true });

  it('seed nodes, credentials and TLS; port 6379 when omitted', () => {
    expect(cluster('rediss://app:p%3Aw@c1.example:7000,10.0.0.2,[fd00::1]:7001')).toEqual({
      mode: 'cluster',
      nodes: [
        { host: 'c1.example', port: 7_000 },
        { host: '10.0.0.2', port: 6_379 },
        { host: 'fd00::1', port: 7_001 },
      ],
      username: 'app',
      password: 'p:w',
      tls: true,
    });
    expect(cluster('redis://127.0.0.1:7000/0')).toMatchObject({ mode: 'cluster', username: undefined, password: undefined, tls: false });
  });

  it.each([
    ['redis+sentinel://s1/m', 'Sentinel and Redis Cluster do not combine'],
    ['redis://c1:7000/3', 'database 0 only'],
    ['redis://c1:7000?family=6', 'no query options'],
    ['redis://c1:7000,,c2:7000', 'node 2 is empty'],
    ['redis://c1:99999', 'node 1 has an invalid port'],
    ['redis://', 'no node is given'],
    ['http://c1:7000', 'unsupported scheme'],
  ])('refuses %s (%s)', (raw, problem) => {
    let message = '';
    try {
      cluster(raw);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain(problem);
  });

  it('is shown without its password', () => {
    expect(describeRedisTarget(cluster('redis://:secret@c1:7000,c2:7001'))).toBe('redis://:***@c1:7000,c2:7001 (cluster)');
  });

  it('the Cluster client reads and writes on primaries; the command connection fails fast, the subscriber queues', () => {
    const target = cluster('rediss://app:pw@c1:7000');
    if (target.mode !== 'cluster') throw new Error('expected a cluster target');
    expect(clusterOptions(target, 'commands', settings)).toMatchObject({
      scaleReads: 'master',
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      redisOptions: { username: 'app', password: 'pw', tls: {}, commandTimeout: 2_000, maxRetriesPerRequest: 1 },
    });
    expect(clusterOptions(target, 'subscriber', settings)).toMatchObject({ enableOfflineQueue: true, redisOptions: { maxRetriesPerRequest: null } });
  });
});

describe('the ioredis options', () => {
  const target = sentinel('rediss+sentinel://app:pw@s1:26380,s2/mymaster?db=4&sentinel_username=mon&sentinel_password=spw');

  it('reach the primary through the Sentinels, with failover detection, on both connections', () => {
    for (const role of ['commands', 'subscriber'] as const) {
      expect(redisOptions(target, role, settings)).toMatchObject({
        sentinels: [
          { host: 's1', port: 26_380 },
          { host: 's2', port: 26_379 },
        ],
        name: 'mymaster',
        role: 'master',
        db: 4,
        username: 'app',
        password: 'pw',
        sentinelUsername: 'mon',
        sentinelPassword: 'spw',
        failoverDetector: true,
        tls: {},
        enableTLSForSentinelMode: true,
        sentinelTLS: {},
      });
    }
  });

  it('the command connection fails fast; the subscriber queues until connected', () => {
    expect(redisOptions(target, 'commands', settings)).toMatchObject({ enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: 2_000 });
    expect(redisOptions(target, 'subscriber', settings)).toMatchObject({ maxRetriesPerRequest: null });
    expect(redisOptions(target, 'subscriber', settings).enableOfflineQueue).toBeUndefined();
  });

  it('without TLS or credentials, none are set', () => {
    const options = sentinelOptions(sentinel('redis+sentinel://s1/m'));
    for (const key of ['tls', 'enableTLSForSentinelMode', 'sentinelTLS', 'username', 'password', 'sentinelUsername', 'sentinelPassword'])
      expect(options, key).not.toHaveProperty(key);
  });

  it('a READONLY reply (a demoted primary) reconnects; other errors do not', () => {
    const reconnectOnError = sentinelOptions(target).reconnectOnError as (err: Error) => boolean | 1 | 2;
    expect(reconnectOnError(new Error("READONLY You can't write against a read only replica."))).toBe(1);
    expect(reconnectOnError(new Error('ERR Error running script: READONLY You can’t write'))).toBe(1);
    expect(reconnectOnError(new Error('NOSCRIPT No matching script'))).toBe(false);
  });

  it('a single server is its URL plus the connection options, no Sentinel options', () => {
    const options = redisOptions({ mode: 'standalone', url: 'redis://h' }, 'commands', settings);
    expect(options).not.toHaveProperty('sentinels');
    expect(options).not.toHaveProperty('failoverDetector');
  });
});

describe('what may be printed', () => {
  it('describeRedisTarget shows every part but the credentials', () => {
    expect(describeRedisTarget(parseRedisUrl('rediss+sentinel://app:pw@s1:26380,[::1]/my%3Am?db=4&sentinel_username=mon&sentinel_password=spw'))).toBe(
      'rediss+sentinel://app:***@s1:26380,[::1]:26379/my%3Am?db=4&sentinel_username=mon&sentinel_password=***',
    );
    expect(describeRedisTarget(parseRedisUrl('redis+sentinel://:pw@s1/m'))).toBe('redis+sentinel://:***@s1:26379/m');
    expect(describeRedisTarget(parseRedisUrl('redis+sentinel://s1/m'))).toBe('redis+sentinel://s1:26379/m');
    expect(describeRedisTarget(parseRedisUrl('redis://:pw@h:6379/2'))).toBe('redis://:***@h:6379/2');
  });

  it.each([
    ['redis://:hunter2@host:6379', 'redis://:***@host:6379'],
    ['redis://user:hunter2@host', 'redis://user:***@host'],
    ['redis://hunter2@host', 'redis://***@host'],
    ['redis://host:6379/0', 'redis://host:6379/0'],
    ['http://user:hun/ter2@owner', 'http://user:***@owner'],
    ['redis+sentinel://:hunter2@s1,s2/m?sentinel_password=hunter3&db=1', 'redis+sentinel://:***@s1,s2/m?sentinel_password=***&db=1'],
    ['redis+sentinel://:hunter2@s1/m?sentinel_password=hun@ter3', 'redis+sentinel://:***@s1/m?sentinel_password=***'],
    ['ftp://x:hunter2@y z', 'ftp://x:***@y z'],
    ['not a url hunter', 'not a url hunter'],
  ])('maskUrl(%j) is %j', (raw, masked) => {
    expect(maskUrl(raw)).toBe(masked);
  });

  it('a log line loses the password of any URL in it and credential-named query parameters', () => {
    const line = JSON.stringify({ msg: 'connect to redis://app:hunter2@10.0.0.1:6379 failed', err: 'at rediss+sentinel://:hunter3@s1/m?sentinel_password=hunter4' });
    const scrubbed = scrubLine(line);
    for (const secret of ['hunter2', 'hunter3', 'hunter4']) expect(scrubbed).not.toContain(secret);
    expect(scrubbed).toContain('redis://app:***@10.0.0.1:6379');
    expect(scrubbed).toContain('sentinel_password=***');
    // A relayed path with an '@' in it is left alone.
    expect(scrubLine('GET http://owner/api/v4/packages/npm/@scope/pkg')).toBe('GET http://owner/api/v4/packages/npm/@scope/pkg');
  });
});
