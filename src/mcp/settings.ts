/** The MCP section of the configuration (docs/configuration.md "MCP tools"): deadlines, and where external servers may be. */
import { readFlag, readMs, type Env } from '../core/env';

export interface McpSettings {
  /** Deadline of one MCP tool call. */
  callTimeoutMs: number;
  /** Deadline of a run's MCP discovery (connect and list every server), before its start is sent. */
  discoveryTimeoutMs: number;
  /** Let external MCP servers be on loopback, link-local and private addresses (tests, on-premise). */
  allowPrivate: boolean;
}

export function readMcpSettings(env: Env): McpSettings {
  return {
    // A tool call may take a while (a search, a build); 30 s bounds a hung MCP server.
    callTimeoutMs: readMs(env, 'LONGRUN_MCP_TIMEOUT_MS', 30_000),
    // Discovery holds a run's start (the tools go into it): a few seconds bound a slow
    // server; a detached start also never waits past the accept wait (launcher.ts).
    discoveryTimeoutMs: readMs(env, 'LONGRUN_MCP_DISCOVERY_TIMEOUT_MS', 5_000),
    allowPrivate: readFlag(env, 'LONGRUN_MCP_ALLOW_PRIVATE', false),
  };
}
