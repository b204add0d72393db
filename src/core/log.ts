/**
 * The process logger: pino JSON lines, one object per line. Secrets are redacted at the
 * logger level, so no code path can leak them, in three layers:
 *
 *  1. pino `redact` paths for the header maps we log on purpose (fast, exact);
 *  2. a logMethod hook that walks each logged object (plain objects and arrays, a few
 *     levels deep) and replaces the value of every secret-named key: Authorization,
 *     cookies, the Workhorse JWT header, every x-gitlab-*token* header, and any key
 *     naming a token, secret or password;
 *  3. the destination itself: each finished line is scanned for what a secret looks
 *     like whatever key (or message, or error stack) carries it — a JWT, a
 *     `Bearer …`/`Basic …` credential, a GitLab token (glpat-…), the password in a URL
 *     (`redis://:***@host`) or a credential-named query parameter — and for secret-named
 *     JSON keys that layers 1–2 could not see (an error's own properties).
 */
import pino from 'pino';

export type Logger = pino.Logger;

const REDACTED = '[redacted]';

/** Header names whose values are credentials (lower case, as Node gives them). */
const secretHeaders = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'gitlab-workhorse-api-request',
  'x-gitlab-oauth-token',
  'x-gitlab-token',
  'private-token',
  'job-token',
  'deploy-token',
];

// Headers appear under these keys in our log lines.
const headerContainers = ['headers', 'req.headers', 'res.headers', 'request.headers', 'response.headers', 'metadata'];

const redactPaths = headerContainers.flatMap((container) => secretHeaders.map((h) => `${container}["${h}"]`));

/**
 * A key whose value is a credential wherever it appears: the secret headers above,
 * every x-gitlab-*token* header, and anything naming a token, secret, password or key.
 */
const secretKey =
  /^(?:authorization|proxy-authorization|cookie|set-cookie|gitlab-workhorse-api-request|x-gitlab-.*token.*)$|token|secret|passw(?:or)?d|api[-_]?key|credential|jwt/i;

/**
 * The ids on every log line of a request, session or run (docs/spec.md §7, §13): its
 * request id, and the same value as `correlation_id` — labkit's field name, the one
 * GitLab's log searches key on. The correlation id is the caller's X-Request-Id when
 * valid, else a new one (http/request-id.ts).
 */
export function correlation<T extends string | undefined>(requestId: T): { request_id: T; correlation_id: T } {
  return { request_id: requestId, correlation_id: requestId };
}

/** How deep the hook looks into a logged object; deeper values are left to layer 3. */
const MAX_DEPTH = 6;

/**
 * Creates the logger at `level` (LONGRUN_LOG_LEVEL) writing to `destination` (default
 * stdout, asynchronously; flush() before exit).
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'longrun' },
      redact: { paths: redactPaths, censor: REDACTED },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      hooks: {
        logMethod(args, method) {
          const cleaned = args.map((arg: unknown) => scrubObject(arg, 0));
          method.apply(this, cleaned as Parameters<typeof method>);
        },
      },
    },
    new ScrubbingDestination(destination ?? pino.destination({ sync: false })),
  );
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * `value` with every secret-named key's value replaced, copied only where something
 * changed (logging a clean object costs one walk, no allocation). Errors, class
 * instances and buffers are left as they are: pino serialises them, layer 3 scans them.
 */
function scrubObject(value: unknown, depth: number): unknown {
  if (!value || typeof value !== 'object' || depth > MAX_DEPTH) return value;
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    value.forEach((item, i) => {
      const cleaned = scrubObject(item, depth + 1);
      if (cleaned !== item) (out ??= [...value])[i] = cleaned;
    });
    return out ?? value;
  }
  if (!isPlainObject(value)) return value;
  let out: Record<string, unknown> | undefined;
  for (const key of Object.keys(value)) {
    const item = value[key];
    const cleaned = secretKey.test(key) && item !== undefined && item !== null ? REDACTED : scrubObject(item, depth + 1);
    if (cleaned !== item) (out ??= { ...value })[key] = cleaned;
  }
  return out ?? value;
}

/** What a credential looks like in text, whatever carries it. */
const secretValues: Array<[RegExp, string]> = [
  // A JWT (JWS compact form): base64url '{"' header, payload, signature.
  [/eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*/g, REDACTED],
  // An HTTP credential in text ("Authorization: Bearer x", an error message quoting one).
  [/\bBearer\s+[^\s"\\,;]+/gi, `Bearer ${REDACTED}`],
  [/\bBasic\s+[A-Za-z0-9+/]{8,}={0,2}/g, `Basic ${REDACTED}`],
  // GitLab token formats: personal, OAuth, deploy, runner, CI job, trigger, feed, … tokens.
  [/\bgl(?:pat|oas|dt|rt|cbt|ptt|ft|imt|agent|soat|ffct|wt)-[A-Za-z0-9_-]{8,}/g, REDACTED],
];

/** What a masked credential reads as in a URL (`redis://:***@host:6379`). */
const MASK = '***';

/** A query parameter whose value is a credential (`?sentinel_password=`, `?private_token=`). */
const secretParamName = /pass|secret|token|auth|credential|api[-_]?key/i;

function maskUserinfo(userinfo: string): string {
  const colon = userinfo.indexOf(':');
  // No ':' — `redis://secret@host` is a password to ioredis, so the whole of it goes.
  return colon < 0 ? MASK : `${userinfo.slice(0, colon)}:${MASK}`;
}

/**
 * `value`, one URL (valid or not), with its credentials masked: the password (or a lone
 * user info) becomes `***`, and so does every credential-named query parameter. The user
 * info is taken to end at the last '@', so a password holding an unencoded '@', '/' or '?'
 * is masked whole (a URL with an '@' in its path loses a little more than its password).
 */
export function maskUrl(value: string): string {
  const params = value.replace(/([?&;])([^=&;#]*)=([^&;#]*)/g, (whole, sep: string, name: string) => (secretParamName.test(name) ? `${sep}${name}=${MASK}` : whole));
  return params.replace(/^(\s*[A-Za-z][A-Za-z0-9+.-]*:\/\/)([\s\S]*)@/, (_whole, scheme: string, userinfo: string) => `${scheme}${maskUserinfo(userinfo)}@`);
}

/**
 * A URL's user info in free text (a log line): up to an '@' with no space, quote or '/'
 * before it (so a relayed path like `/npm/@scope/pkg` is left alone).
 */
const urlUserinfo = /\b([A-Za-z][A-Za-z0-9+.-]*:\/\/)([^\s"'@<>/]*)@/g;
/** A credential-named query parameter in free text. */
const secretQueryParam = /([?&;])([^=&;#\s"'<>]*(?:pass|secret|token|credential|api[-_]?key)[^=&;#\s"'<>]*)=([^&;#\s"'<>\\]*)/gi;

/** A secret-named JSON key with a string (or string array) value, in a serialised line. */
const secretJsonMember =
  /"((?:[^"\\]*?)(?:authorization|cookie|gitlab-workhorse-api-request|token|secret|passw(?:or)?d|api[-_]?key|credential|jwt)(?:[^"\\]*?))":(?:"(?:[^"\\]|\\.)*"|\[(?:\s*"(?:[^"\\]|\\.)*"\s*,?)*\])/gi;

/** Layer 3: every finished line is scrubbed before it reaches the real destination. */
export function scrubLine(line: string): string {
  let out = line.replace(secretJsonMember, (_m, key: string) => `"${key}":"${REDACTED}"`);
  for (const [pattern, replacement] of secretValues) out = out.replace(pattern, replacement);
  out = out.replace(secretQueryParam, (_whole, sep: string, name: string) => `${sep}${name}=${MASK}`);
  return out.replace(urlUserinfo, (_whole, scheme: string, userinfo: string) => `${scheme}${maskUserinfo(userinfo)}@`);
}

/** A pino destination that scrubs each line, then hands it to the real one. */
class ScrubbingDestination implements pino.DestinationStream {
  constructor(private readonly target: pino.DestinationStream & { flush?: (cb?: (err?: Error) => void) => void; flushSync?: () => void }) {}

  write(line: string): void {
    this.target.write(scrubLine(line));
  }

  /** logger.flush() reaches here; pass it on so buffered lines are written before exit. */
  flush(cb?: (err?: Error) => void): void {
    if (typeof this.target.flush === 'function') this.target.flush(cb);
    else cb?.();
  }

  flushSync(): void {
    this.target.flushSync?.();
  }
}
