/**
 * Where a runHTTPRequest is sent (docs/spec.md §6): LONGRUN_RELAY_URL, the owner URL when it is
 * unset. Workhorse hands its relays to its own router in process (actions.go `Execute`), so
 * they get its routing: request-body uploads, send-data answers, its headers. Beside GitLab,
 * the relay URL is Workhorse's own listener, and longrun's relays pass that router as
 * Workhorse's own do; preauths and segment-end callbacks still go to the owner (Puma).
 */

/**
 * The User-Agent of a relayed call: Workhorse's (actions.go `buildRequest`). Rails reads it
 * as GitLab's own traffic (Gitlab::Tracking::ClientIdentity: `system`), not as an API
 * client's; longrun's version travels in `Gitlab-Workhorse: longrun-<version>`.
 */
export const RELAY_USER_AGENT = 'Agent-Flow-via-GitLab-Workhorse';

/** A URL's path as a relative URL root: no trailing "/", "" at the domain root. */
export function relativeRootOf(url: URL): string {
  return url.pathname.replace(/\/+$/, '');
}

/**
 * `path` under the relative URL root `root`, as Workhorse's applyRelativeURLRoot puts it:
 * the workflow service sends unprefixed paths, so the root is prepended, unless the path
 * already is the root or starts with it followed by "/". The path was checked first
 * (relay-path.ts): it starts with one "/".
 */
export function withRelativeRoot(root: string, path: string): string {
  if (root === '' || path === root || path.startsWith(`${root}/`)) return path;
  return root + path;
}
