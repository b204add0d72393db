/**
 * Which runHTTPRequest paths may be relayed to the owner API (docs/spec.md §6): a relative path
 * starting with one "/", no scheme or host, no backslash, no `..` segment, also once
 * percent-decoded (so `%2e%2e` and `%2f` tricks cannot climb out of the API root).
 */

export type PathCheck = { ok: true; path: string } | { ok: false; reason: string };

function decodeFully(text: string): string | undefined {
  let current = text;
  // Decode until stable, so double encoding (%252e) cannot hide a "..".
  for (let i = 0; i < 4; i++) {
    let next: string;
    try {
      next = decodeURIComponent(current);
    } catch {
      return undefined;
    }
    if (next === current) return current;
    current = next;
  }
  return current;
}

/**
 * Paths the checks below always accept, recognised in one test: one leading "/", then only
 * letters, digits, "_", "-", "/" (no dot, so no dot segment; no "%", "\\", ":" or
 * whitespace), and an optional query of the same plus "=", "&". Most API paths are like this.
 */
const PLAIN_PATH = /^\/(?!\/)[A-Za-z0-9_\-/]*(?:\?[A-Za-z0-9_\-=&]*)?$/;

export function checkRelayPath(path: unknown): PathCheck {
  if (typeof path !== 'string' || path.length === 0) return { ok: false, reason: 'path is empty' };
  if (path.length > 8_192) return { ok: false, reason: 'path is too long' };
  if (PLAIN_PATH.test(path)) return { ok: true, path };
  if (!path.startsWith('/')) return { ok: false, reason: 'path must be relative and start with /' };
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  if (/[\u0000-\u0020\u007f]/.test(path)) return { ok: false, reason: 'path contains whitespace or control characters' };
  // Without a '%' the decoded path is the path itself: one candidate to check, no decoding.
  const decoded = path.includes('%') ? decodeFully(path) : path;
  if (decoded === undefined) return { ok: false, reason: 'path has invalid percent-encoding' };
  for (const candidate of decoded === path ? [path] : [path, decoded]) {
    if (candidate.startsWith('//')) return { ok: false, reason: 'path must not name a host' };
    if (candidate.includes('\\')) return { ok: false, reason: 'path must not contain backslashes' };
    if (/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(candidate)) return { ok: false, reason: 'path must not have a scheme' };
    const pathname = candidate.split(/[?#]/, 1)[0] ?? '';
    if (pathname.split('/').some((segment) => segment === '..' || segment === '.')) {
      return { ok: false, reason: 'path must not contain dot segments' };
    }
  }
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  if (/[\u0000-\u001f\u007f]/.test(decoded)) return { ok: false, reason: 'path contains control characters' };
  return { ok: true, path };
}
