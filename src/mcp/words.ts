/** The MCP tools' word lists: which servers, how a call went, why discovery left one out (metric labels, logs). */

/** Where an MCP server lives: the owner's own (`gitlab`, `orbit`) or anywhere else. */
export const mcpServerKinds = ['owner', 'external'] as const;
export type McpServerKind = (typeof mcpServerKinds)[number];

/** How a runMCPTool call on a server was answered. */
export const mcpCallResults = ['ok', 'tool_error', 'invalid_args', 'too_large', 'timeout', 'error', 'aborted'] as const;
export type McpCallResult = (typeof mcpCallResults)[number];

/** Why a configured MCP server's tools were left out of a run. */
export const mcpDiscoveryFailures = ['refused', 'timeout', 'failed'] as const;
export type McpDiscoveryFailure = (typeof mcpDiscoveryFailures)[number];
