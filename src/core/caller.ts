/**
 * What longrun passes on about the dispatcher that made an execute request (docs/spec.md §4, §6):
 * its address and X-Forwarded-For chain (for the relayed API calls' X-Forwarded-For) and
 * its User-Agent and GitLab client headers (for the workflow service's metadata).
 * Taken once from the request; everything after the HTTP route reads this, never the
 * request itself.
 */
import type { IncomingMessage } from 'node:http';

export interface Caller {
  /** The caller's socket address, without port; an IPv4-mapped IPv6 address unmapped. */
  address: string | undefined;
  /** The caller's own X-Forwarded-For header(s), joined with ", " (undefined when absent). */
  forwardedFor: string | undefined;
  /** The caller's User-Agent. */
  userAgent: string | undefined;
  /** X-Gitlab-Client-Name and X-Gitlab-Client-Version from the caller. */
  clientName: string | undefined;
  clientVersion: string | undefined;
}

/** Workhorse truncates the client name it passes on to 255 characters; so does longrun. */
const MAX_CLIENT_HEADER_LENGTH = 255;

/** Printable ASCII: what an HTTP/2 header value (gRPC metadata) may carry without escaping. */
const PRINTABLE = /^[\x20-\x7e]*$/;

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** A header value fit for gRPC metadata: printable ASCII, trimmed, at most `max` characters. */
export function metadataValue(value: string | undefined, max = MAX_CLIENT_HEADER_LENGTH): string | undefined {
  const trimmed = value?.trim();
  if (!trimmed || !PRINTABLE.test(trimmed)) return undefined;
  return trimmed.slice(0, max);
}

/**
 * Go's net/http reports an IPv4 client of a dual-stack listener as `a.b.c.d`; Node as
 * `::ffff:a.b.c.d`. The owner parses X-Forwarded-For, so it gets what Workhorse would send.
 */
function unmapped(address: string | undefined): string | undefined {
  const mapped = address && /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  return mapped ? mapped[1] : address;
}

export function callerOf(req: IncomingMessage): Caller {
  return {
    address: unmapped(req.socket.remoteAddress),
    forwardedFor: single(req.headers['x-forwarded-for']),
    userAgent: req.headers['user-agent'],
    clientName: single(req.headers['x-gitlab-client-name']),
    clientVersion: single(req.headers['x-gitlab-client-version']),
  };
}

/**
 * The X-Forwarded-For a relayed request carries, as Workhorse builds it: the caller's own
 * chain, then the caller's address. Undefined when the address is unknown (the socket is
 * gone), as Workhorse sends none when it cannot split the remote address.
 */
export function forwardedForOf(caller: Caller | undefined): string | undefined {
  if (!caller?.address) return undefined;
  const prior = caller.forwardedFor?.trim();
  return prior ? `${prior}, ${caller.address}` : caller.address;
}
