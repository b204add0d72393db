/**
 * Capabilities as the newest Workhorse passes them (websocket.go at gitlabhq 04e80ac, and
 * http_handler.go's decodeStartEvent), on both transports, through a real gateway and the
 * simulators: what the workflow service's startRequest carries when a client announces
 * every capability Workhorse knows, in another order, beside ones it does not.
 *
 * - WebSocket: the client's list through the ten-entry client allowlist, in Workhorse's
 *   order, then the owner's ServerCapabilities through the six-entry server allowlist.
 * - Execute (blocking or detached): no client capability at all — its caller executes
 *   nothing, and BuildHTTP clears the body's list — then the owner's, through the same
 *   server allowlist.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import type { CallRecord } from '../../sandbox/workflow-sim';
import { startStack, type Stack } from '../../stack';
import { openSession, start } from '../helpers/ws-session';

/** Workhorse's ClientCapabilities, in its order (websocket.go, 04e80ac). */
const WORKHORSE_CLIENT = [
  'incremental_streaming',
  'shell_command',
  'read_file_chunked',
  'command_timeout',
  'web_search',
  'tool_call_streaming',
  'schedule_notification',
  'grep_fixed_strings',
  'read_file_image',
  'auto_mode',
];
/** Workhorse's ServerCapabilities, in its order (websocket.go, 04e80ac). */
const WORKHORSE_SERVER = ['advanced_search', 'tool_call_approval', 'tool_call_pattern_approval', 'job_trace_pagination', 'incremental_checkpoints', 'incremental_checkpoints_only'];

/** Everything Workhorse allows, reversed, with words it does not know among them (a newer client, Rails' own tool_call_approval_source). */
const ANNOUNCED_CLIENT = ['made_up', ...[...WORKHORSE_CLIENT].reverse(), 'advanced_search', 'streaming'];
const OWNER_SERVER = ['tool_call_approval_source', ...[...WORKHORSE_SERVER].reverse(), 'auto_mode', 'not_allowed'];

const STEPS: Step[] = [{ op: 'checkpoint', text: 'done', status: 'FINISHED' }, { op: 'end' }];

let stack: Stack | undefined;
const clients: WebSocket[] = [];

afterEach(async () => {
  for (const ws of clients.splice(0)) ws.terminate();
  await stack?.close();
  stack = undefined;
});

async function callOf(s: Stack, id: string): Promise<CallRecord> {
  await s.workflow.waitFor(() => s.workflow.callsFor(id).length > 0, 10_000, `a call of ${id}`);
  return s.workflow.callsFor(id)[0] as CallRecord;
}

describe('the WebSocket route', () => {
  it('passes the ten client capabilities Workhorse allows, in its order, then the six server ones; nothing else', async () => {
    stack = await startStack({ redis: 'none', preauth: { serverCapabilities: OWNER_SERVER } });
    const session = await openSession(stack.url, clients);
    session.send(start('6101', STEPS, { clientCapabilities: ANNOUNCED_CLIENT }));
    expect(await session.closed).toEqual({ code: 1000, reason: '' });
    const call = await callOf(stack, '6101');
    expect(call.startRequest.clientCapabilities).toEqual([...WORKHORSE_CLIENT, ...WORKHORSE_SERVER]);
  });

  it('each of the three the newest Workhorse added passes alone', async () => {
    stack = await startStack({ redis: 'none', preauth: { serverCapabilities: [] } });
    for (const [i, capability] of ['grep_fixed_strings', 'read_file_image', 'auto_mode'].entries()) {
      const id = String(6110 + i);
      const session = await openSession(stack.url, clients);
      session.send(start(id, STEPS, { clientCapabilities: [capability] }));
      expect(await session.closed).toEqual({ code: 1000, reason: '' });
      expect((await callOf(stack, id)).startRequest.clientCapabilities).toEqual([capability]);
    }
  });
});

describe('the execute route', () => {
  it.each([
    ['blocking', false],
    ['detached', true],
  ] as const)('%s: announces no client capability, whatever the body lists; the owner’s server ones pass Workhorse’s allowlist', async (_transport, detached) => {
    stack = await startStack({ redis: 'own', preauth: { detached, serverCapabilities: OWNER_SERVER } });
    const res = await stack.executeText('6120', { body: { goal: 'go', workflowMetadata: scenarioMetadata(STEPS), clientCapabilities: ANNOUNCED_CLIENT } });
    expect(res.status).toBe(detached ? 202 : 200);
    const call = await callOf(stack, '6120');
    expect(call.startRequest.clientCapabilities).toEqual(WORKHORSE_SERVER);
  });
});
