/**
 * A discovered MCP tool as the workflow service is told about it: `McpTool` of the
 * contract (proto/contract.proto: name=1, description=2, inputSchema=3 as a JSON string,
 * icons=4 Icons{items: Icon{url, mime_type, sizes, theme}}, annotations=5
 * ToolAnnotations{title, read_only_hint, destructive_hint, idempotent_hint,
 * open_world_hint}, trusted=6), named `<server>_<tool>` as Workhorse names it.
 *
 * icons and annotations are filled in now; they reach the wire once proto/contract.proto
 * declares them (the encoder carries the fields the proto knows and drops the others).
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { McpTool } from '../workflow/contract';

export interface McpToolIcon {
  url: string;
  mime_type?: string;
  sizes?: string[];
  theme?: string;
}

export interface McpToolAnnotations {
  title?: string;
  read_only_hint?: boolean;
  destructive_hint?: boolean;
  idempotent_hint?: boolean;
  open_world_hint?: boolean;
}

/** McpTool with the fields the contract adds (icons=4, annotations=5). */
export interface OfferedTool extends McpTool {
  name: string;
  icons?: { items: McpToolIcon[] };
  annotations?: McpToolAnnotations;
}

/** The name the workflow service knows a tool by: `<server>_<tool>` (Workhorse). */
function prefixedToolName(server: string, tool: string): string {
  return `${server}_${tool}`;
}

function annotationsOf(tool: Tool): McpToolAnnotations | undefined {
  const given = tool.annotations ?? {};
  const annotations: McpToolAnnotations = {};
  const title = given.title ?? tool.title;
  if (title !== undefined) annotations.title = title;
  if (given.readOnlyHint !== undefined) annotations.read_only_hint = given.readOnlyHint;
  if (given.destructiveHint !== undefined) annotations.destructive_hint = given.destructiveHint;
  if (given.idempotentHint !== undefined) annotations.idempotent_hint = given.idempotentHint;
  if (given.openWorldHint !== undefined) annotations.open_world_hint = given.openWorldHint;
  return Object.keys(annotations).length > 0 ? annotations : undefined;
}

function iconsOf(tool: Tool): { items: McpToolIcon[] } | undefined {
  const items = (tool.icons ?? []).map((icon) => {
    const item: McpToolIcon = { url: icon.src };
    if (icon.mimeType !== undefined) item.mime_type = icon.mimeType;
    if (icon.sizes !== undefined) item.sizes = [...icon.sizes];
    if (icon.theme !== undefined) item.theme = icon.theme;
    return item;
  });
  return items.length > 0 ? { items } : undefined;
}

/** The McpTool for `tool` of the server the owner named `server`. */
export function toolMessage(server: string, tool: Tool, trusted: boolean): OfferedTool {
  const message: OfferedTool = {
    name: prefixedToolName(server, tool.name),
    description: tool.description ?? '',
    inputSchema: JSON.stringify(tool.inputSchema),
    // Always set, as Workhorse does (proto.Bool(Trusted)): the service sees an explicit false.
    trusted,
  };
  const annotations = annotationsOf(tool);
  if (annotations) message.annotations = annotations;
  const icons = iconsOf(tool);
  if (icons) message.icons = icons;
  return message;
}
