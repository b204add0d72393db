/**
 * Where each MCP server of the owner's `McpServers` is reached (docs/spec.md §2, Workhorse
 * `mcp.go`): `gitlab` and `orbit` are the owner's own endpoints, `LONGRUN_OWNER_URL` +
 * `/api/v4/mcp` and `/api/v4/orbit/mcp`, reached like the API relay (the user's token,
 * the Workhorse headers), whatever URL the owner gives them; every other server needs
 * an http(s) `URL`, and a literal non-public address is refused here (a name is checked
 * when it is resolved, see address-guard.ts).
 */
import type { McpServerKind } from './words';
import type { McpServer } from '../owner/preauth';
import { isNonPublicAddress } from './address-guard';

/** The owner's own MCP servers, by the name the owner configures them under. */
const OWNER_SERVER_PATHS: Readonly<Record<string, string>> = { gitlab: '/api/v4/mcp', orbit: '/api/v4/orbit/mcp' };

/** One configured server, resolved to where it is reached. */
export interface McpEndpoint {
  /** The owner's name for the server: the prefix of its tools' names (`<name>_<tool>`). */
  name: string;
  kind: McpServerKind;
  url: URL;
  /** The owner's configuration: Headers, Tools, PreApprovedTools, Trusted. */
  config: McpServer;
}

export type ResolvedServer = { ok: true; endpoint: McpEndpoint } | { ok: false; kind: McpServerKind; reason: string };

/** The owner's endpoint for `path`, under the owner URL's own base path (like the API relay). */
function ownerEndpoint(ownerUrl: URL, path: string): URL {
  const url = new URL(ownerUrl.href);
  url.pathname = url.pathname.replace(/\/+$/, '') + path;
  url.search = '';
  url.hash = '';
  return url;
}

/**
 * Resolves the server the owner named `name`. Never throws: a server that cannot be
 * used is `{ok: false}` with the reason (logged by the caller; its tools are left out).
 */
export function resolveServer(name: string, config: McpServer, ownerUrl: URL, allowPrivate: boolean): ResolvedServer {
  const ownerPath = OWNER_SERVER_PATHS[name];
  if (ownerPath !== undefined) return { ok: true, endpoint: { name, kind: 'owner', url: ownerEndpoint(ownerUrl, ownerPath), config } };
  const refuse = (reason: string): ResolvedServer => ({ ok: false, kind: 'external', reason });
  if (!config.URL) return refuse('no URL configured');
  let url: URL;
  try {
    url = new URL(config.URL);
  } catch {
    return refuse('URL is not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return refuse(`URL scheme ${url.protocol} is not http or https`);
  // Credentials in a URL would be sent to whoever the URL names; the owner sends them as Headers.
  if (url.username || url.password) return refuse('URL carries credentials');
  if (!allowPrivate && isNonPublicAddress(url.hostname)) {
    return refuse(`URL names a non-public address (${url.hostname}); set LONGRUN_MCP_ALLOW_PRIVATE=true to allow it`);
  }
  return { ok: true, endpoint: { name, kind: 'external', url, config } };
}
