/**
 * Response headers passed on from the owner (docs/spec.md §2, §6), shaped as Workhorse shapes
 * them: Go's net/http hands a proxy its upstream's headers under canonical names
 * (`X-Next-Page`, `Www-Authenticate`), without the hop-by-hop ones. The workflow service
 * looks relayed headers up by exact name, so the spelling is part of the contract.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** RFC 9110 token characters: the only bytes a header name may hold. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * The canonical form of a header name, as Go's textproto.CanonicalMIMEHeaderKey writes
 * it: the first letter and every letter after a hyphen upper case, the rest lower case.
 * A name that is not a token is returned unchanged (as Go does).
 */
function canonicalHeaderKey(name: string): string {
  const known = canonicalNames.get(name);
  if (known !== undefined) return known;
  if (!TOKEN.test(name)) return name;
  let out = '';
  let upper = true;
  for (const ch of name) {
    out += upper ? ch.toUpperCase() : ch.toLowerCase();
    upper = ch === '-';
  }
  // Every relayed answer brings the same few names: remember them (a bounded set).
  if (canonicalNames.size < CANONICAL_CACHE_SIZE) canonicalNames.set(name, out);
  return out;
}

const CANONICAL_CACHE_SIZE = 1_024;
const canonicalNames = new Map<string, string>();

/**
 * Headers that describe one connection, not the message (RFC 9110 §7.6.1), and are never
 * passed on by a proxy; plus every `Proxy-*` header (addressed to a proxy, not to the
 * final recipient). Headers named in `Connection` are hop-by-hop too (see hopByHop()).
 */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

const isHopByHop = (name: string): boolean => HOP_BY_HOP.has(name) || name.startsWith('proxy-');

/** Which lower-case names must not be passed on, given the Connection header's value(s). */
function hopByHopFor(connection: string | string[] | undefined): (name: string) => boolean {
  const tokens = Array.isArray(connection) ? connection.join(',') : connection;
  // Most answers name nothing in Connection beyond keep-alive/close: no set to build.
  if (!tokens || /^\s*(?:keep-alive|close)\s*$/i.test(tokens)) return isHopByHop;
  const named = new Set(
    tokens
      .split(',')
      .map((token) => token.trim().toLowerCase())
      .filter(Boolean),
  );
  return (name) => isHopByHop(name) || named.has(name);
}

/** Which lower-case names must not be passed on from `headers`. */
function hopByHop(headers: IncomingHttpHeaders): (name: string) => boolean {
  return hopByHopFor(headers['connection']);
}

/** A raw header name or value (undici hands them over as bytes) as text, byte for byte. */
const text = (raw: Buffer | string): string => (typeof raw === 'string' ? raw : raw.toString('latin1'));

/**
 * An owner answer's headers as `HttpResponse.headers` (docs/spec.md §6): canonical names, repeated
 * values joined with ", " (as Workhorse joins a Go header's values), hop-by-hop removed.
 * `raw` is the answer's header list as received, name and value alternating (undici's
 * `onHeaders`): read once, without first building a lower-case header object.
 */
export function relayedResponseHeaders(raw: ReadonlyArray<Buffer | string>): Record<string, string> {
  const names: string[] = new Array<string>(raw.length >> 1);
  let connection: string | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = text(raw[i] as Buffer | string).toLowerCase();
    names[i >> 1] = name;
    if (name === 'connection') {
      const value = text(raw[i + 1] as Buffer | string);
      connection = connection === undefined ? value : `${connection},${value}`;
    }
  }
  const skip = hopByHopFor(connection);
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = names[i >> 1] as string;
    if (skip(name)) continue;
    const key = canonicalHeaderKey(name);
    const value = text(raw[i + 1] as Buffer | string);
    // Repeated lines, and two spellings of one name, merge as Go merges them.
    out[key] = out[key] === undefined ? value : `${out[key]}, ${value}`;
  }
  return out;
}

/**
 * The end-to-end headers of an owner's refusal, for the caller (docs/spec.md §2): not hop-by-hop,
 * not the framing (Content-Length, Transfer-Encoding: the body is re-framed, and cut at
 * 32 KiB), not X-Request-Id (the caller gets longrun's, which the owner was given).
 * Repeated headers (Set-Cookie, WWW-Authenticate) stay repeated.
 */
export function passedOnDenialHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const skip = hopByHop(headers);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (value === undefined || skip(lower) || lower === 'content-length' || lower === 'x-request-id') continue;
    out[canonicalHeaderKey(lower)] = value;
  }
  return out;
}
