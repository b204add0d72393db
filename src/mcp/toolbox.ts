/**
 * A run's MCP tools: the sessions opened at its start, the tools they offer (sent in the
 * StartWorkflowRequest), and the calls the workflow service makes through runMCPTool
 * (docs/spec.md §4). Every call is answered — a result, a tool error, or longrun's error — and
 * the run goes on whatever happens. `close()` ends every session (DELETE) when the run
 * ends; no MCP connection outlives its run.
 */
import type { Logger } from '../core/log';
import type { McpMetrics } from './metrics';
import { TraceSpan, Tracing } from '../observability/tracing';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { McpCallResult } from './words';
import { deadline } from '../core/deadline';
import type { Catalog } from './catalog';
import type { McpSession } from './session';
import { parseToolArguments, toolAnswer, type PlainTextAnswer } from './tool-answer';
import type { OfferedTool } from './tool-message';

/**
 * How long ending a session may take. A DELETE takes milliseconds; a server that hangs
 * must not hold a run's teardown, and so a drain, longer than this.
 */
export const SESSION_CLOSE_TIMEOUT_MS = 1_000;

export interface ToolboxDeps {
  metrics: McpMetrics;
  logger: Logger;
  /** Deadline of one tool call. */
  callTimeoutMs: number;
  /** Each call is a CLIENT span. */
  tracing?: Tracing;
}

/**
 * An SDK error can carry a server's whole answer ("Error POSTing to endpoint: <body>"):
 * what is logged or answered of it is cut here.
 */
const ERROR_TEXT_LIMIT = 2_000;

/** The message of an error and of its causes ("fetch failed: connect ECONNREFUSED …"), cut to a readable size. */
export function errorText(err: unknown): string {
  const parts: string[] = [];
  let current: unknown = err;
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    if (current.message && !parts.includes(current.message)) parts.push(current.message);
    current = current.cause;
  }
  const text = parts.join(': ') || String(err);
  return text.length > ERROR_TEXT_LIMIT ? `${text.slice(0, ERROR_TEXT_LIMIT)}…` : text;
}

export function isSdkTimeout(err: unknown): boolean {
  return err instanceof McpError && err.code === ErrorCode.RequestTimeout;
}

export class McpToolbox {
  private closing: Promise<void> | undefined;

  constructor(
    private readonly catalog: Catalog,
    /** Every session opened, listed or not: all are closed. */
    private readonly sessions: readonly McpSession[],
    private readonly deps: ToolboxDeps | undefined,
  ) {}

  /** The tools for StartWorkflowRequest.mcpTools. */
  get tools(): readonly OfferedTool[] {
    return this.catalog.tools;
  }

  /** Whether `name` (`<server>_<tool>`) is one of this run's tools (else a WebSocket client's own). */
  has(name: string): boolean {
    return this.catalog.routes.has(name);
  }

  /** The prefixed names for StartWorkflowRequest.preapproved_tools. */
  get preapprovedTools(): readonly string[] {
    return this.catalog.preapprovedTools;
  }

  /**
   * Calls the tool the workflow service named (`<server>_<tool>`) with `argsJson`, within
   * the call deadline and `signal` (the run's), as a span under `parent` whose traceparent
   * the request carries. Never throws.
   */
  async call(name: string, argsJson: string | undefined, signal: AbortSignal, parent: TraceSpan = TraceSpan.NONE): Promise<PlainTextAnswer> {
    const route = this.catalog.routes.get(name);
    const deps = this.deps;
    if (!route || !deps) {
      deps?.logger.info({ mcp_tool: name }, 'mcp tool not available');
      return { error: `mcp tool not available: ${name}` };
    }
    const kind = route.session.endpoint.kind;
    // The call's lines carry the run's trace ids (the toolbox's logger has the request's, from discovery).
    const log = deps.logger.child({ mcp_tool: name, mcp_server: route.session.endpoint.name, args_size: argsJson?.length ?? 0, ...parent.logFields });
    const args = parseToolArguments(argsJson);
    if (!args.ok) {
      deps.metrics.mcpCall(kind, 'invalid_args');
      log.info({ result: 'invalid_args' }, 'mcp tool call refused');
      return { error: args.error };
    }
    const tracing = deps.tracing ?? Tracing.OFF;
    const span = tracing.mcpCall(parent, name, kind);
    const started = performance.now();
    const limit = deadline(signal, deps.callTimeoutMs);
    let answer: PlainTextAnswer;
    let result: McpCallResult;
    try {
      const outcome = toolAnswer(await route.session.callTool(route.tool, args.value, limit.signal, deps.callTimeoutMs, span.headers));
      ({ answer, result } = outcome);
    } catch (err) {
      if (signal.aborted) {
        result = 'aborted';
        answer = { error: 'request aborted' };
      } else if (limit.timedOut || isSdkTimeout(err)) {
        result = 'timeout';
        answer = { error: `MCP tool call timed out after ${deps.callTimeoutMs} ms` };
      } else {
        result = 'error';
        answer = { error: `MCP tool call failed: ${errorText(err)}` };
      }
    } finally {
      limit.dispose();
    }
    const durationS = (performance.now() - started) / 1000;
    tracing.mcpCallEnded(span, result);
    deps.metrics.mcpCall(kind, result, durationS);
    log.info({ result, duration_ms: Math.round(durationS * 1000), response_size: (answer.response ?? answer.error ?? '').length }, 'mcp tool called');
    return answer;
  }

  /** Ends every session (bounded by SESSION_CLOSE_TIMEOUT_MS). Idempotent; never rejects. */
  close(): Promise<void> {
    this.closing ??= Promise.allSettled(this.sessions.map((session) => session.close(SESSION_CLOSE_TIMEOUT_MS))).then(() => undefined);
    return this.closing;
  }
}

/** The toolbox of a run whose owner configured no MCP server. */
export const NO_MCP_TOOLS = new McpToolbox({ tools: [], preapprovedTools: [], routes: new Map(), duplicates: [] }, [], undefined);
