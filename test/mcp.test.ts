/**
 * runMCPTool (SPEC §4): performed on the owner-configured MCP server that has the tool,
 * with the server's headers; anything else answered with an error, exactly once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { McpServerSimulator } from '../src/sandbox/mcp-sim';
import { startStack, type Stack } from './helpers/stack';

let stack: Stack | undefined;
let mcp: McpServerSimulator | undefined;

afterEach(async () => {
  await stack?.close();
  await mcp?.close();
  stack = undefined;
  mcp = undefined;
});

describe('runMCPTool', () => {
  it('calls the tool on the owner-configured server (one session per run) and answers with its text', async () => {
    mcp = await McpServerSimulator.start();
    stack = await startStack({
      preauth: {
        detached: false,
        mcpServers: {
          sim: { URL: mcp.url, Headers: { 'x-mcp-auth': 'mcp-secret' }, Tools: ['echo', 'fail'], PreApprovedTools: ['echo'] },
        },
      },
    });
    const res = await stack.executeText('800', {
      steps: [
        { op: 'mcp', name: 'echo', args: '{"q":"hello"}' },
        { op: 'mcp', name: 'fail' },
        { op: 'mcp', name: 'not_configured' },
        { op: 'mcp', name: 'echo', args: 'not json' },
        { op: 'end' },
      ],
    });
    expect(res.status).toBe(200);
    const answers = stack.workflow.callsFor('800')[0]?.actionResponses.map((a) => a.response.plainTextResponse) ?? [];
    expect(answers).toHaveLength(4);
    expect(answers[0]?.response).toBe('{"q":"hello"}');
    expect(answers[0]?.error ?? '').toBe('');
    expect(answers[1]?.error).toBe('tool failed on purpose');
    expect(answers[2]?.error).toBe('mcp tool not available: not_configured');
    expect(answers[3]?.error).toBe('tool arguments are not valid JSON');
    const methods = mcp.received.map((r) => r.method);
    expect(methods).toEqual(['initialize', 'notifications/initialized', 'tools/call', 'tools/call']);
    expect(mcp.received.every((r) => r.headers['x-mcp-auth'] === 'mcp-secret')).toBe(true);
    expect(mcp.received[2]?.params).toEqual({ name: 'echo', arguments: { q: 'hello' } });
    // The owner's tools replaced the caller's in the start request.
    expect(stack.workflow.callsFor('800')[0]?.startRequest.mcpTools?.map((t) => t.name)).toEqual(['echo', 'fail']);
    expect(stack.workflow.callsFor('800')[0]?.startRequest.preapproved_tools).toEqual(['echo']);
  });

  it('an unreachable MCP server is an error answer, not a failed run', async () => {
    stack = await startStack({ preauth: { detached: false, mcpServers: { gone: { URL: 'http://127.0.0.1:1/mcp', Tools: ['echo'] } } } });
    const res = await stack.executeText('801', { steps: [{ op: 'mcp', name: 'echo' }, { op: 'end' }] });
    expect(res.status).toBe(200);
    expect(stack.workflow.callsFor('801')[0]?.actionResponses[0]?.response.plainTextResponse?.error).toMatch(/^mcp request failed: /);
  });
});
