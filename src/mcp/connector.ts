/**
 * Opens a run's MCP tools (docs/spec.md §2, §4): one process-wide object that holds what every
 * run's sessions share — the HTTP dispatchers (the one for external servers refuses
 * non-public addresses), the JWT signer for the owner's own servers, the deadlines —
 * and, at a run's start, connects to every server the owner configured and lists its
 * tools, all servers at once, within one discovery deadline. A server that cannot be
 * reached, refuses, or is not done by the deadline is logged and counted; its tools are
 * left out and the run starts without them (Workhorse's behaviour).
 */
import { Agent } from 'undici';
import { correlation, type Logger } from '../core/log';
import type { McpMetrics } from './metrics';
import { TraceSpan, type Tracing } from '../observability/tracing';
import type { McpDiscoveryFailure, McpServerKind } from './words';
import { gitlabWorkhorseHeader, userAgent } from '../core/version';
import { deadline, type Deadline } from '../core/deadline';
import { JwtSigner } from '../core/jwt';
import type { McpServer } from '../owner/preauth';
import { privateAddressCause, publicOnlyLookup } from './address-guard';
import { buildCatalog, type ListedServer } from './catalog';
import { resolveServer, type McpEndpoint } from './servers';
import { McpSession } from './session';
import { TOOL_ANSWER_LIMIT } from './tool-answer';
import { NO_MCP_TOOLS, McpToolbox, SESSION_CLOSE_TIMEOUT_MS, errorText, isSdkTimeout } from './toolbox';

/**
 * Largest response body read from an MCP server. Above the answer limit: JSON escaping
 * and the JSON-RPC envelope make the body larger than the text it carries (a text over
 * the answer limit is refused in tool-answer.ts with a clear error); this bounds memory.
 */
const BODY_LIMIT = 2 * TOOL_ANSWER_LIMIT + 1024 * 1024;

export interface McpConnectorOptions {
  ownerUrl: URL;
  secret: Uint8Array;
  jwtRefreshMs: number;
  /** Deadline of one tool call. */
  callTimeoutMs: number;
  /** Allow external servers on loopback, link-local and private addresses. */
  allowPrivate: boolean;
  metrics: McpMetrics;
  logger: Logger;
  /** Tool calls are spans (toolbox.ts). */
  tracing?: Tracing;
}

/** What a run brings to open its MCP tools. */
export interface McpAccess {
  /** The owner's McpServers. */
  servers: Record<string, McpServer> | null | undefined;
  /** The user's API token: `Authorization: Bearer` to the owner's own servers. */
  token: string;
  workflowId: string;
  requestId: string;
  /** The caller's X-Forwarded-For chain plus the caller's address, when known. */
  forwardedFor?: string | undefined;
  /** The request's span: discovery and session requests carry its traceparent (a tool call its own), their log lines its ids. */
  span?: TraceSpan | undefined;
}

export class McpConnector {
  private readonly ownerAgent: Agent;
  private readonly externalAgent: Agent;
  private readonly jwt: JwtSigner;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: McpConnectorOptions) {
    // No undici timeouts: every request has a deadline of its own (discovery, call, close),
    // and a tool's answer may stream for as long as its call deadline allows.
    const timeouts = { headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 30_000 };
    this.ownerAgent = new Agent(timeouts);
    this.externalAgent = new Agent(options.allowPrivate ? timeouts : { ...timeouts, connect: { lookup: publicOnlyLookup } });
    this.jwt = new JwtSigner(options.secret, undefined, options.jwtRefreshMs);
  }

  /**
   * Connects to every configured server and lists its tools, within `timeoutMs`. Never
   * throws: servers that fail are left out. The toolbox is the caller's to close.
   */
  async open(access: McpAccess, timeoutMs: number): Promise<McpToolbox> {
    const servers = Object.entries(access.servers ?? {});
    if (servers.length === 0) return NO_MCP_TOOLS;
    const log = this.options.logger.child({ ...correlation(access.requestId), workflow_id: access.workflowId, ...access.span?.logFields });
    const started = performance.now();
    const limit = deadline(undefined, timeoutMs);
    const sessions: McpSession[] = [];
    let listed: Array<ListedServer | undefined>;
    try {
      listed = await Promise.all(
        servers.map(async ([name, config]): Promise<ListedServer | undefined> => {
          const resolved = resolveServer(name, config, this.options.ownerUrl, this.options.allowPrivate);
          if (!resolved.ok) {
            this.discoveryFailed(log, name, resolved.kind, 'refused', resolved.reason);
            return undefined;
          }
          const session = this.session(resolved.endpoint, access, log);
          sessions.push(session);
          try {
            await session.connect(limit.signal, timeoutMs);
            return { endpoint: resolved.endpoint, session, tools: await session.listTools(limit.signal, timeoutMs) };
          } catch (err) {
            this.discoveryFailed(log, name, resolved.endpoint.kind, failureReason(err, limit), errorText(err));
            // Ended now rather than with the run: nothing will use it.
            void session.close(SESSION_CLOSE_TIMEOUT_MS);
            return undefined;
          }
        }),
      );
    } finally {
      limit.dispose();
    }
    const catalog = buildCatalog(listed.filter((server): server is ListedServer => server !== undefined));
    if (catalog.duplicates.length > 0) log.warn({ mcp_tools: catalog.duplicates }, 'mcp tool names listed twice: the first kept');
    const durationS = (performance.now() - started) / 1000;
    this.options.metrics.mcpDiscovery(durationS);
    log.info({ mcp_servers: servers.length, mcp_tools: catalog.tools.length, duration_ms: Math.round(durationS * 1000) }, 'mcp tools discovered');
    return new McpToolbox(catalog, sessions, {
      metrics: this.options.metrics,
      logger: log,
      callTimeoutMs: this.options.callTimeoutMs,
      ...(this.options.tracing ? { tracing: this.options.tracing } : {}),
    });
  }

  private discoveryFailed(log: Logger, server: string, kind: McpServerKind, reason: McpDiscoveryFailure, why: string): void {
    this.options.metrics.mcpDiscoveryFailure(kind, reason);
    log.warn({ mcp_server: server, server_kind: kind, reason, err: why }, 'mcp server left out of the run');
  }

  private session(endpoint: McpEndpoint, access: McpAccess, log: Logger): McpSession {
    return new McpSession(endpoint, {
      dispatcher: endpoint.kind === 'owner' ? this.ownerAgent : this.externalAgent,
      headers: this.headers(endpoint, access),
      bodyLimit: BODY_LIMIT,
      onError: (err) => log.debug({ mcp_server: endpoint.name, err: errorText(err) }, 'mcp transport error'),
      traced: access.span?.headers !== undefined,
    });
  }

  /**
   * Headers of every request to a server, later entries winning: for the owner's own
   * servers what the API relay sends (the user's token, the Workhorse headers), then the
   * server's configured Headers, then longrun's own.
   */
  private headers(endpoint: McpEndpoint, access: McpAccess): () => Promise<Record<string, string>> {
    const ours: Record<string, string> = { 'user-agent': userAgent, 'x-request-id': access.requestId, ...(access.span ?? TraceSpan.NONE).headers };
    if (access.forwardedFor) ours['x-forwarded-for'] = access.forwardedFor;
    const configured = endpoint.config.Headers ?? {};
    if (endpoint.kind === 'external') {
      const fixed = { ...configured, ...ours };
      return () => Promise.resolve(fixed);
    }
    return async () => ({
      ...(access.token ? { authorization: `Bearer ${access.token}` } : {}),
      'gitlab-workhorse': gitlabWorkhorseHeader,
      'gitlab-workhorse-api-request': await this.jwt.get(),
      'x-gitlab-duo-workflow-id': access.workflowId,
      ...configured,
      ...ours,
    });
  }

  /** Closes the connection pools (runs have closed their sessions by then). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const agents = [this.ownerAgent, this.externalAgent];
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), SESSION_CLOSE_TIMEOUT_MS)));
      const closed = await Promise.race([Promise.allSettled(agents.map((agent) => agent.close())), late]);
      clearTimeout(timer);
      if (closed === 'late') await Promise.allSettled(agents.map((agent) => agent.destroy()));
    })();
    return this.closing;
  }
}

function failureReason(err: unknown, limit: Deadline): McpDiscoveryFailure {
  if (privateAddressCause(err)) return 'refused';
  if (limit.timedOut || isSdkTimeout(err)) return 'timeout';
  return 'failed';
}
