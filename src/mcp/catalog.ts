/**
 * What a run offers the model (Workhorse `buildTools`): for each server, in the owner's
 * order, the tools it listed — all of them when its `Tools` is null or absent, else only
 * those named — each as an McpTool named `<server>_<tool>`; `preapproved_tools` are the
 * prefixed names of the offered tools its `PreApprovedTools` names. A prefixed name
 * already taken (two servers whose names and tools run together) keeps its first owner.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { McpEndpoint } from './servers';
import type { McpSession } from './session';
import { toolMessage, type OfferedTool } from './tool-message';

/** One server that was reached and listed. */
export interface ListedServer {
  endpoint: McpEndpoint;
  session: McpSession;
  tools: Tool[];
}

/** Where a prefixed tool name is called: its session, and the tool's own name there. */
export interface ToolRoute {
  session: McpSession;
  tool: string;
}

export interface Catalog {
  tools: OfferedTool[];
  preapprovedTools: string[];
  routes: Map<string, ToolRoute>;
  /** Prefixed names listed twice; the later ones were left out. */
  duplicates: string[];
}

export function buildCatalog(servers: readonly ListedServer[]): Catalog {
  const catalog: Catalog = { tools: [], preapprovedTools: [], routes: new Map(), duplicates: [] };
  for (const { endpoint, session, tools } of servers) {
    const { Tools, PreApprovedTools, Trusted } = endpoint.config;
    const wanted = Tools === null || Tools === undefined ? undefined : new Set(Tools);
    const preapproved = new Set(PreApprovedTools ?? []);
    for (const tool of tools) {
      if (wanted && !wanted.has(tool.name)) continue;
      const message = toolMessage(endpoint.name, tool, Trusted ?? false);
      if (catalog.routes.has(message.name)) {
        catalog.duplicates.push(message.name);
        continue;
      }
      catalog.routes.set(message.name, { session, tool: tool.name });
      catalog.tools.push(message);
      if (preapproved.has(tool.name)) catalog.preapprovedTools.push(message.name);
    }
  }
  return catalog;
}
