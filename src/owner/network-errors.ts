/**
 * The text of a relayed request's network failure (docs/spec.md §6). The workflow service decides
 * whether to retry a tool's API call by matching words of the error it is handed —
 * "connection refused", "connection reset", "no such host" — the words Go's net package
 * uses (Workhorse is written in Go). Node names the same failures by errno code
 * (`connect ECONNREFUSED 10.0.0.1:443`), which no such matcher knows; so the error is
 * reworded here, Go's way, keeping the address it concerns.
 */

interface SystemError {
  code?: unknown;
  address?: unknown;
  port?: unknown;
  hostname?: unknown;
  message?: unknown;
}

function where(err: SystemError, fallback: string): string {
  if (typeof err.address === 'string') return typeof err.port === 'number' ? `${err.address}:${err.port}` : err.address;
  return fallback;
}

/**
 * `err` (from undici or the socket under it) as Go would word it, e.g.
 * `dial tcp 127.0.0.1:1: connect: connection refused`. `target` (host:port of the owner)
 * names the peer when the error does not.
 */
export function networkErrorText(err: unknown, target: string): string {
  const e = (err ?? {}) as SystemError;
  const cause = (e as { cause?: SystemError }).cause;
  const code = typeof e.code === 'string' ? e.code : typeof cause?.code === 'string' ? cause.code : '';
  const source = typeof e.code === 'string' ? e : (cause ?? e);
  const host = typeof source.hostname === 'string' ? source.hostname : target.replace(/:\d+$/, '');
  switch (code) {
    case 'ECONNREFUSED':
      return `dial tcp ${where(source, target)}: connect: connection refused`;
    case 'ECONNRESET':
      return `read tcp ${target}: connection reset by peer`;
    case 'EPIPE':
      return `write tcp ${target}: broken pipe`;
    case 'ENOTFOUND':
      return `dial tcp: lookup ${host}: no such host`;
    case 'EAI_AGAIN':
      return `dial tcp: lookup ${host}: temporary failure in name resolution`;
    case 'EHOSTUNREACH':
      return `dial tcp ${where(source, target)}: connect: no route to host`;
    case 'ENETUNREACH':
      return `dial tcp ${where(source, target)}: connect: network is unreachable`;
    case 'UND_ERR_SOCKET':
      // The owner closed the connection before a whole answer: Go reports an EOF.
      return `read tcp ${target}: unexpected EOF (connection closed by the owner)`;
    default: {
      const message = typeof e.message === 'string' && e.message ? e.message : String(err);
      return `request failed: ${message}`;
    }
  }
}

/** Node's and undici's codes for a connect, header or body timeout. */
export function isTimeoutError(err: unknown): boolean {
  const code = (err as SystemError | undefined)?.code;
  return code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
}
