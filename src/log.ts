/**
 * The process logger: pino JSON lines. Secrets are redacted at the logger level, so no
 * code path can leak them: Authorization, cookies, JWT headers and every
 * x-gitlab-*token* header, wherever a headers object is logged.
 */
import pino from 'pino';

const secretHeaders = [
  'authorization',
  'cookie',
  'set-cookie',
  'gitlab-workhorse-api-request',
  'x-gitlab-oauth-token',
  'x-gitlab-token',
  'private-token',
  'job-token',
];

// pino's redaction needs explicit paths; headers appear under these keys in our log lines.
const headerContainers = ['headers', 'req.headers', 'res.headers', 'request.headers', 'metadata'];

export const redactPaths = headerContainers.flatMap((container) =>
  secretHeaders.map((h) => `${container}["${h}"]`),
);

export type Logger = pino.Logger;

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'longrun' },
      redact: { paths: redactPaths, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      hooks: {
        // x-gitlab-*token* header names vary; scrub any such key in logged header maps.
        logMethod(args, method) {
          const cleaned = args.map((arg: unknown) => scrubTokenHeaders(arg));
          method.apply(this, cleaned as Parameters<typeof method>);
        },
      },
    },
    destination,
  );
}

const tokenHeader = /^x-gitlab-.*token.*$/i;

/** A copy of a log argument with every x-gitlab-*token* header value replaced. */
function scrubTokenHeaders(arg: unknown): unknown {
  if (!arg || typeof arg !== 'object') return arg;
  let out: Record<string, unknown> | undefined;
  for (const container of ['headers', 'metadata']) {
    const headers = (arg as Record<string, unknown>)[container];
    if (!headers || typeof headers !== 'object') continue;
    const keys = Object.keys(headers).filter((key) => tokenHeader.test(key));
    if (keys.length === 0) continue;
    out ??= { ...(arg as Record<string, unknown>) };
    out[container] = { ...headers, ...Object.fromEntries(keys.map((k) => [k, '[redacted]'])) };
  }
  return out ?? arg;
}
