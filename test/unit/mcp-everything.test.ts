/**
 * MCP against the reference server, `@modelcontextprotocol/server-everything` in its
 * streamable-HTTP mode (a child process on loopback): what it lists is what the workflow
 * service is offered — names prefixed, descriptions and input schemas as listed, all of
 * them for `Tools: null`, only the named ones for a list — and its tools answer through
 * runMCPTool. The reference listing is taken with the SDK's own client, independently of
 * longrun.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { createLogger } from '../../src/core/log';
import { GatewayMetrics } from '../../src/gateway-metrics';
import { McpConnector } from '../../src/mcp/connector';
import { messageTypes } from '../../src/workflow/contract';
import { startEverythingServer, type EverythingServer } from '../helpers/mcp-everything';
import { startStack, type Stack } from '../../stack';
import { testSecret } from '../../stack/secret';

let everything: EverythingServer;
/** The server's tools as the SDK's own client lists them (every page). */
let reference: Tool[];
let stack: Stack | undefined;

async function listWithSdk(url: string): Promise<Tool[]> {
  const client = new Client({ name: 'reference-lister', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  try {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return tools;
  } finally {
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  }
}

beforeAll(async () => {
  everything = await startEverythingServer();
  reference = await listWithSdk(everything.url);
});

afterAll(async () => {
  await everything?.stop();
});

afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

function mcpStack(servers: Record<string, { URL?: string; Tools?: string[] | null; PreApprovedTools?: string[]; Trusted?: boolean }>): Promise<Stack> {
  return startStack({ env: { LONGRUN_MCP_ALLOW_PRIVATE: 'true' }, preauth: { detached: false, mcpServers: servers } });
}

function recorded(workflowId: string) {
  const call = stack?.workflow.callsFor(workflowId)[0];
  if (!call) throw new Error(`no call for workflow ${workflowId}`);
  return call;
}

describe('the reference MCP server', () => {
  it('Tools: null offers every tool it lists, with its description and input schema; everything_echo echoes, a tool error comes back as an error', async () => {
    expect(reference.map((t) => t.name)).toContain('echo');
    stack = await mcpStack({ everything: { URL: everything.url, Tools: null, Trusted: true } });
    const res = await stack.executeText('900', {
      steps: [
        { op: 'mcp', name: 'everything_echo', args: '{"message":"hello, reference"}' },
        { op: 'mcp', name: 'everything_get-sum', args: '{"a":"not a number","b":2}' },
        { op: 'mcp', name: 'everything_get-tiny-image', args: '{}' },
        { op: 'end' },
      ],
    });
    expect(res.status).toBe(200);
    const offered = recorded('900').startRequest.mcpTools ?? [];
    expect(offered.map((t) => t.name)).toEqual(reference.map((t) => `everything_${t.name}`));
    for (const [i, tool] of reference.entries()) {
      expect(offered[i]?.description).toBe(tool.description ?? '');
      expect(JSON.parse(offered[i]?.inputSchema ?? 'null')).toEqual(tool.inputSchema);
      expect(offered[i]?.trusted).toBe(true);
    }
    const answers = recorded('900').actionResponses.map((a) => a.response.plainTextResponse);
    expect(answers[0]).toEqual({ response: 'Echo: hello, reference' });
    expect(answers[1]?.response ?? '').toBe('');
    expect(answers[1]?.error).toMatch(/get-sum/);
    // Its first content item is text, followed by an image: the text is the answer.
    expect(answers[2]).toEqual({ response: "Here's the image you requested:" });
    // The run's end ended the session on the reference server (it logs each DELETE).
    await expect.poll(() => everything.output(), { timeout: 5_000 }).toMatch(/Received session termination request for session/);
  });

  it('a Tools list offers only the tools named (and listed); PreApprovedTools are prefixed', async () => {
    stack = await mcpStack({ everything: { URL: everything.url, Tools: ['echo', 'get-sum', 'not-a-tool'], PreApprovedTools: ['get-sum'] } });
    const res = await stack.executeText('901', {
      steps: [{ op: 'mcp', name: 'everything_get-sum', args: '{"a":2,"b":3}' }, { op: 'mcp', name: 'everything_get-tiny-image', args: '{}' }, { op: 'end' }],
    });
    expect(res.status).toBe(200);
    const start = recorded('901').startRequest;
    expect(start.mcpTools?.map((t) => t.name)).toEqual(['everything_echo', 'everything_get-sum']);
    expect(start.mcpTools?.every((t) => t.trusted === false)).toBe(true);
    expect(start.preapproved_tools).toEqual(['everything_get-sum']);
    const answers = recorded('901').actionResponses.map((a) => a.response.plainTextResponse);
    expect(answers[0]?.response).toMatch(/\b5\b/);
    expect(answers[1]).toEqual({ error: 'mcp tool not available: everything_get-tiny-image' });
  });

  describe('tool annotations (proto/contract.proto McpTool.annotations = 5)', () => {
    it('are read from the listing and mapped to the contract names', async () => {
      const metrics = new GatewayMetrics({ defaultMetrics: false }).mcp;
      const connector = new McpConnector({
        ownerUrl: new URL('http://127.0.0.1:9/'),
        secret: testSecret,
        jwtRefreshMs: 30_000,
        callTimeoutMs: 5_000,
        allowPrivate: true,
        metrics,
        logger: createLogger('silent'),
      });
      const toolbox = await connector.open({ servers: { everything: { URL: everything.url } }, token: '', workflowId: '1', requestId: 'r' }, 5_000);
      try {
        const echo = toolbox.tools.find((t) => t.name === 'everything_echo');
        expect(echo?.annotations).toEqual({ title: 'Echo Tool', read_only_hint: true, destructive_hint: false, idempotent_hint: true, open_world_hint: false });
      } finally {
        await toolbox.close();
        await connector.close();
      }
    });

    // proto/contract.proto declares McpTool.annotations (the real contract has it): without it the encoder
    // would drop the field and the service could not receive it, so dropping it fails here.
    it('reach the workflow service', async () => {
      expect(messageTypes.StartWorkflowRequest.lookupType('McpTool').fields['annotations'], 'proto/contract.proto declares McpTool.annotations').toBeDefined();
      stack = await mcpStack({ everything: { URL: everything.url, Tools: ['echo'] } });
      expect((await stack.executeText('902', { steps: [{ op: 'end' }] })).status).toBe(200);
      const echo = (recorded('902').startRequest.mcpTools?.[0] ?? {}) as Record<string, unknown>;
      expect(echo['annotations']).toMatchObject({ title: 'Echo Tool', read_only_hint: true, idempotent_hint: true });
    });
  });
});
