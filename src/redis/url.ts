/**
 * LONGRUN_REDIS_URL (docs/spec.md §5) parsed into where longrun's Redis is and how to reach it.
 *
 * Accepted forms:
 *
 *   redis://[[user]:password@]host[:port][/db][?ioredis options]     one server, handed to ioredis as is
 *   rediss://…                                                      the same over TLS
 *   redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/<master-name>[?db=N]
 *                    [&sentinel_username=U][&sentinel_password=P]
 *   rediss+sentinel://…                                             TLS to the Sentinels and the data nodes
 *
 * With LONGRUN_REDIS_KEYS=cluster the URL names a Redis Cluster instead, by seed nodes
 * (any nodes of the cluster; the client learns the rest from them):
 *
 *   redis://[[user]:password@]host[:port][,host[:port]…]             Redis Cluster (ioredis Cluster)
 *   rediss://…                                                      the same over TLS
 *
 * In the Sentinel form the hosts are Sentinels (port 26379 when omitted, `[::1]:26379`
 * for IPv6), the user and password are those of the data nodes (the primary and its
 * replicas), and `sentinel_username` / `sentinel_password` authenticate to the Sentinels
 * themselves (the convention of Python's redis+sentinel:// URLs); Sentinels without
 * `requirepass` need neither. Percent-encode reserved characters in any of them.
 */
import { maskUrl } from '../core/log';

export interface RedisHostPort {
  host: string;
  port: number;
}

/** A single Redis server: the URL is given to ioredis unchanged (it parses its own options). */
export interface StandaloneRedisTarget {
  mode: 'standalone';
  url: string;
}

/** A primary found through Sentinel, followed across failovers. */
export interface SentinelRedisTarget {
  mode: 'sentinel';
  /** The Sentinels to ask, in the URL's order; ioredis adds the others they know of. */
  sentinels: RedisHostPort[];
  /** The monitored master's name (`sentinel monitor <name> …`). */
  masterName: string;
  db: number;
  /** Credentials of the data nodes; undefined when the URL has none. */
  username: string | undefined;
  password: string | undefined;
  /** Credentials of the Sentinels themselves. */
  sentinelUsername: string | undefined;
  sentinelPassword: string | undefined;
  /** rediss+sentinel://: TLS to the Sentinels and to the data nodes (system CAs, or NODE_EXTRA_CA_CERTS). */
  tls: boolean;
}

/** A Redis Cluster, reached through any of its nodes (LONGRUN_REDIS_KEYS=cluster). */
export interface ClusterRedisTarget {
  mode: 'cluster';
  /** Seed nodes, in the URL's order. */
  nodes: RedisHostPort[];
  username: string | undefined;
  password: string | undefined;
  /** rediss://: TLS to every node. */
  tls: boolean;
}

export type RedisTarget = StandaloneRedisTarget | SentinelRedisTarget | ClusterRedisTarget;

/** What is wrong with a LONGRUN_REDIS_URL value; the message never contains the value. */
export class RedisUrlError extends Error {
  constructor(problem: string) {
    super(problem);
    this.name = 'RedisUrlError';
  }
}

const DEFAULT_SENTINEL_PORT = 26_379;
const SENTINEL_PARAMS = ['db', 'sentinel_username', 'sentinel_password'] as const;

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new RedisUrlError(`the ${what} is not valid percent-encoding`);
  }
}

function parsePort(text: string, what: string): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65_535) throw new RedisUrlError(`${what} has an invalid port (1-65535)`);
  return Number(text);
}

function parseHost(entry: string, what: string, defaultPort: number): RedisHostPort {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+))(?::([^:]*))?$/.exec(entry);
  if (!match) throw new RedisUrlError(entry === '' ? `${what} is empty (hosts are separated by single commas)` : `${what} is not host[:port] or [ipv6][:port]`);
  const host = (match[1] ?? match[2]) as string;
  return { host, port: match[3] === undefined ? defaultPort : parsePort(match[3], what) };
}

/**
 * Splits `scheme://[userinfo@]host[,host…][/path][?query]` by hand (WHATWG URL refuses a
 * comma-separated host list), from the right end of the user info (a password may hold an
 * unencoded '@').
 */
function splitMultiHostUrl(raw: string): { username: string | undefined; password: string | undefined; hosts: string[]; path: string; query: string } {
  const rest = raw.slice(raw.indexOf('://') + 3);
  const pathAt = rest.search(/[/?#]/);
  let authority = pathAt < 0 ? rest : rest.slice(0, pathAt);
  let tail = pathAt < 0 ? '' : rest.slice(pathAt);
  const at = authority.lastIndexOf('@');
  let username: string | undefined;
  let password: string | undefined;
  if (at < 0 && tail.includes('@')) {
    // An '@' after a '/', '?' or '#': user info with an unencoded reserved character.
    throw new RedisUrlError('the user info holds a reserved character (/ ? #): percent-encode it');
  }
  if (at >= 0) {
    const userinfo = authority.slice(0, at);
    authority = authority.slice(at + 1);
    const colon = userinfo.indexOf(':');
    const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
    username = user === '' ? undefined : decode(user, 'user name');
    if (colon >= 0) password = decode(userinfo.slice(colon + 1), 'password');
    if (colon < 0 && username !== undefined) {
      // `redis+sentinel://secret@host` is almost always a password written without its
      // leading ':'; taking it as a user name would send AUTH with no password.
      throw new RedisUrlError("the user info has no ':' (write :password@ or user:password@)");
    }
    if (password === '') password = undefined;
  }
  if (tail.includes('#')) throw new RedisUrlError('a fragment (#…) is not allowed');
  const queryAt = tail.indexOf('?');
  const query = queryAt < 0 ? '' : tail.slice(queryAt + 1);
  tail = queryAt < 0 ? tail : tail.slice(0, queryAt);
  return { username, password, hosts: authority === '' ? [] : authority.split(','), path: tail.replace(/^\//, ''), query };
}

function parseDb(text: string): number {
  if (!/^\d{1,9}$/.test(text)) throw new RedisUrlError('db must be a non-negative integer');
  return Number(text);
}

function parseSentinelUrl(raw: string, tls: boolean): SentinelRedisTarget {
  const { username, password, hosts, path, query } = splitMultiHostUrl(raw);
  if (hosts.length === 0) throw new RedisUrlError('no Sentinel host is given');
  const sentinels = hosts.map((entry, i) => parseHost(entry, `Sentinel ${i + 1}`, DEFAULT_SENTINEL_PORT));
  if (path === '') throw new RedisUrlError('the master name is missing (…/<master-name>)');
  if (path.includes('/')) throw new RedisUrlError('the path is the master name alone (give the database as ?db=N)');
  const masterName = decode(path, 'master name');
  if (!/^[\x21-\x7e]{1,256}$/.test(masterName)) throw new RedisUrlError('the master name must be 1-256 printable characters without spaces');

  const params = new URLSearchParams(query);
  for (const key of new Set(params.keys())) {
    if (!(SENTINEL_PARAMS as readonly string[]).includes(key)) {
      // Named only when it looks like an option name: a stray secret must not be echoed.
      const named = /^[A-Za-z][A-Za-z_-]{0,31}$/.test(key) ? `unknown option ${JSON.stringify(key)}` : 'an unknown option';
      throw new RedisUrlError(`${named} (accepted: ${SENTINEL_PARAMS.join(', ')})`);
    }
    if (params.getAll(key).length > 1) throw new RedisUrlError(`option ${key} is given twice`);
  }
  const db = params.has('db') ? parseDb(params.get('db') as string) : 0;
  return {
    mode: 'sentinel',
    sentinels,
    masterName,
    db,
    username,
    password,
    sentinelUsername: params.get('sentinel_username') || undefined,
    sentinelPassword: params.get('sentinel_password') || undefined,
    tls,
  };
}

const DEFAULT_REDIS_PORT = 6_379;

function parseClusterUrl(raw: string, tls: boolean): ClusterRedisTarget {
  const { username, password, hosts, path, query } = splitMultiHostUrl(raw);
  if (hosts.length === 0) throw new RedisUrlError('no node is given');
  const nodes = hosts.map((entry, i) => parseHost(entry, `node ${i + 1}`, DEFAULT_REDIS_PORT));
  // A cluster has database 0 only.
  if (path !== '' && path !== '0') throw new RedisUrlError('a Redis Cluster has database 0 only: no path after the nodes');
  if (query !== '') throw new RedisUrlError('a Redis Cluster URL takes no query options');
  return { mode: 'cluster', nodes, username, password, tls };
}

function parseStandaloneUrl(raw: string): StandaloneRedisTarget {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new RedisUrlError('not a valid URL (percent-encode reserved characters in the password)');
  }
  if (url.hostname === '') throw new RedisUrlError('no host is given');
  if (url.pathname !== '' && url.pathname !== '/' && !/^\/\d{1,9}$/.test(url.pathname)) throw new RedisUrlError('the path must be a database number (/N)');
  return { mode: 'standalone', url: raw };
}

/**
 * Parses LONGRUN_REDIS_URL: with `cluster` (LONGRUN_REDIS_KEYS=cluster) as the seed nodes
 * of a Redis Cluster. Throws RedisUrlError naming the problem (never echoing the value).
 */
export function parseRedisUrl(raw: string, options: { cluster?: boolean } = {}): RedisTarget {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(raw)?.[1]?.toLowerCase();
  if (options.cluster) {
    if (scheme === 'redis' || scheme === 'rediss') return parseClusterUrl(raw, scheme === 'rediss');
    throw new RedisUrlError(
      scheme === 'redis+sentinel' || scheme === 'rediss+sentinel'
        ? 'Sentinel and Redis Cluster do not combine: give the cluster nodes as redis://host:port,host:port'
        : scheme === undefined
          ? 'not a URL'
          : `unsupported scheme ${JSON.stringify(`${scheme}://`)} for a Redis Cluster (redis:// or rediss://)`,
    );
  }
  switch (scheme) {
    case 'redis':
    case 'rediss':
      return parseStandaloneUrl(raw);
    case 'redis+sentinel':
    case 'rediss+sentinel':
      return parseSentinelUrl(raw, scheme === 'rediss+sentinel');
    default:
      throw new RedisUrlError(scheme === undefined ? 'not a URL' : `unsupported scheme ${JSON.stringify(`${scheme}://`)}`);
  }
}

const hostPort = ({ host, port }: RedisHostPort): string => `${host.includes(':') ? `[${host}]` : host}:${port}`;

/**
 * The target as a URL with every credential masked (`:***@`, `sentinel_password=***`):
 * what logs and messages may show.
 */
export function describeRedisTarget(target: RedisTarget): string {
  if (target.mode === 'standalone') return maskUrl(target.url);
  if (target.mode === 'cluster') {
    const userinfo = target.username !== undefined || target.password !== undefined ? `${encodeURIComponent(target.username ?? '')}:***@` : '';
    return `${target.tls ? 'rediss' : 'redis'}://${userinfo}${target.nodes.map(hostPort).join(',')} (cluster)`;
  }
  const userinfo = target.username !== undefined || target.password !== undefined ? `${encodeURIComponent(target.username ?? '')}:***@` : '';
  const params = [
    ...(target.db !== 0 ? [`db=${target.db}`] : []),
    ...(target.sentinelUsername !== undefined ? [`sentinel_username=${encodeURIComponent(target.sentinelUsername)}`] : []),
    ...(target.sentinelPassword !== undefined ? ['sentinel_password=***'] : []),
  ];
  return `${target.tls ? 'rediss' : 'redis'}+sentinel://${userinfo}${target.sentinels.map(hostPort).join(',')}/${encodeURIComponent(target.masterName)}${params.length ? `?${params.join('&')}` : ''}`;
}
