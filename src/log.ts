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
 *     `Bearer …`/`Basic …` credential, a GitLab token (glpat-…) — and for secret-named
 *     JSON keys that layers 1–2 could not see (an error's own properties).
 */
import pino from 'pino';

export type Logger = pino.Logger;

export const REDACTED = '[redacted]';

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

export const redactPaths = headerContainers.flatMap((container) => secretHeaders.map((h) => `${container}["${h}"]`));

/**
 * A key whose value is a credential wherever it appears: the secret headers above,
 * every x-gitlab-*token* header, and anything naming a token, secret, password or key.
 */
const secretKey =
  /^(?:authorization|proxy-authorization|cookie|set-cookie|gitlab-workhorse-api-request|x-gitlab-.*token.*)$|token|secret|passw(?:or)?d|api[-_]?key|credential|jwt/i;

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
export function scrubObject(value: unknown, depth: number): unknown {
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

/** A secret-named JSON key with a string (or string array) value, in a serialised line. */
const secretJsonMember =
  /"((?:[^"\\]*?)(?:authorization|cookie|gitlab-workhorse-api-request|token|secret|passw(?:or)?d|api[-_]?key|credential|jwt)(?:[^"\\]*?))":(?:"(?:[^"\\]|\\.)*"|\[(?:\s*"(?:[^"\\]|\\.)*"\s*,?)*\])/gi;

/** Layer 3: every finished line is scrubbed before it reaches the real destination. */
export function scrubLine(line: string): string {
  let out = line.replace(secretJsonMember, (_m, key: string) => `"${key}":"${REDACTED}"`);
  for (const [pattern, replacement] of secretValues) out = out.replace(pattern, replacement);
  return out;
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

/**
 * A log that writes each `key` at most once per `intervalMs`, with the number of lines it
 * held back since the last one (`suppressed`): for events that can repeat many times a
 * second, such as a Redis connection failing to reconnect.
 */
export function rateLimitedLog(logger: Logger, intervalMs: number): (level: 'info' | 'warn', key: string, fields: object, msg: string) => void {
  const last = new Map<string, { at: number; suppressed: number }>();
  return (level, key, fields, msg) => {
    const now = Date.now();
    const seen = last.get(key);
    if (seen && now - seen.at < intervalMs) {
      seen.suppressed += 1;
      return;
    }
    logger[level]({ ...fields, suppressed: seen?.suppressed ?? 0 }, msg);
    last.set(key, { at: now, suppressed: 0 });
  };
}
