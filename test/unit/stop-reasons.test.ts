/**
 * The words longrun stops runs with (docs/spec.md §4), against a workflow simulator as
 * strict as the real service (ai-gateway `server.py`): a word off its infrastructure
 * allowlist marks the workflow stopped and a later resume is refused. The run limit and
 * a lost lease send their own words only when LONGRUN_WORKFLOW_INFRA_STOP_REASONS lists
 * them, else WORKHORSE_SERVER_SHUTDOWN; what happened is recorded as what it was,
 * whatever word was sent.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { StopReasons } from '../../src/run/stop-reasons';
import { startStack, type Stack } from '../../stack';

let stack: Stack | undefined;

afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const held: Step[] = [{ op: 'checkpoint', text: 'working' }, { op: 'hang' }];
const withRunLimit = ['WORKHORSE_SERVER_SHUTDOWN', 'WORKHORSE_WEBSOCKET_PING_FAILED', 'WORKHORSE_RUN_LIMIT'];

/** A detached run stopped by its run limit, then the owner's resume of the same workflow (an empty goal). */
async function runLimitThenResume(options: { env?: Record<string, string>; service?: readonly string[] }) {
  stack = await startStack({
    preauth: { detached: true },
    ...(options.service ? { workflow: { infraStopReasons: options.service } } : {}),
    env: { LONGRUN_RUN_LIMIT_MS: '400', ...options.env },
  });
  expect((await stack.executeText('910', { steps: held })).status).toBe(202);
  await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 1, 5_000, 'segment end');
  const call = stack.workflow.callsFor('910')[0];
  // What an owner dispatches to resume a segment: no new input, an empty goal.
  const resumed = await stack.executeText('910', { body: { goal: '', workflowMetadata: scenarioMetadata([{ op: 'checkpoint', status: 'FINISHED', text: 'resumed' }]) } });
  return {
    sent: call?.stopReasons ?? [],
    ended: call?.ended?.code ?? call?.ended?.how,
    segmentEnd: stack.owner.segmentEnds[0]?.reason,
    stopped: stack.workflow.stoppedWorkflows.has('910'),
    resumeStatus: resumed.status,
  };
}

describe('the run limit on a service with the public allowlist', () => {
  it('by default sends WORKHORSE_SERVER_SHUTDOWN: acknowledged UNAVAILABLE, the workflow stays resumable and the next segment resumes; recorded as run_limit', async () => {
    const got = await runLimitThenResume({});
    expect(got).toEqual({ sent: ['WORKHORSE_SERVER_SHUTDOWN'], ended: 'UNAVAILABLE', segmentEnd: 'run_limit', stopped: false, resumeStatus: 202 });
    expect(stack!.logs()).toMatch(/"reason":"run_limit"[^\n]*"stop_outcome":"ack"[^\n]*"msg":"run ended"/);
    expect(stack!.logs()).toMatch(/"run_limit":"WORKHORSE_SERVER_SHUTDOWN"[^\n]*"msg":"stop words in force/);
  });

  it('listing WORKHORSE_RUN_LIMIT where the service does not allowlist it marks the workflow stopped, and its resume is refused (what the variable guards against)', async () => {
    const got = await runLimitThenResume({ env: { LONGRUN_WORKFLOW_INFRA_STOP_REASONS: withRunLimit.join(',') } });
    expect(got).toEqual({ sent: ['WORKHORSE_RUN_LIMIT'], ended: 'ok', segmentEnd: 'run_limit', stopped: true, resumeStatus: 400 });
  });
});

describe('the run limit on a service that allowlists WORKHORSE_RUN_LIMIT', () => {
  it('gets that word when configured: acknowledged OK, the workflow stays resumable', async () => {
    const got = await runLimitThenResume({ env: { LONGRUN_WORKFLOW_INFRA_STOP_REASONS: withRunLimit.join(',') }, service: withRunLimit });
    expect(got).toEqual({ sent: ['WORKHORSE_RUN_LIMIT'], ended: 'ok', segmentEnd: 'run_limit', stopped: false, resumeStatus: 202 });
    expect(stack!.logs()).toMatch(/"reason":"run_limit"[^\n]*"stop_outcome":"ack"[^\n]*"msg":"run ended"/);
  });
});

describe('StopReasons', () => {
  const publicService = new StopReasons(['WORKHORSE_SERVER_SHUTDOWN', 'WORKHORSE_WEBSOCKET_PING_FAILED']);
  const widerService = new StopReasons(['WORKHORSE_SERVER_SHUTDOWN', 'WORKHORSE_RUN_LIMIT', 'WORKHORSE_LOCK_LOST', 'MY_INFRA_WORD']);

  it('longrun’s own stops: the most specific word the service allowlists, and the status that acknowledges it', () => {
    expect(publicService.infra('run_limit')).toEqual({ end: 'run_limit', reason: 'WORKHORSE_SERVER_SHUTDOWN', ack: 14 });
    expect(publicService.infra('lock_lost')).toEqual({ end: 'lock_lost', reason: 'WORKHORSE_SERVER_SHUTDOWN', ack: 14 });
    expect(publicService.infra('drain')).toEqual({ end: 'drain', reason: 'WORKHORSE_SERVER_SHUTDOWN', ack: 14 });
    expect(widerService.infra('run_limit')).toEqual({ end: 'run_limit', reason: 'WORKHORSE_RUN_LIMIT', ack: 0 });
    expect(widerService.infra('lock_lost')).toEqual({ end: 'lock_lost', reason: 'WORKHORSE_LOCK_LOST', ack: 0 });
    expect(widerService.infra('drain')).toEqual({ end: 'drain', reason: 'WORKHORSE_SERVER_SHUTDOWN', ack: 14 });
  });

  it('a WebSocket client’s stops keep Workhorse’s words, acknowledged OK', () => {
    expect(publicService.websocket('client_closed', 1001)).toEqual({ end: 'client_closed', reason: 'WORKHORSE_WEBSOCKET_CLOSE_1001', ack: 0 });
    expect(publicService.websocket('pong_timeout')).toEqual({ end: 'pong_timeout', reason: 'WORKHORSE_WEBSOCKET_PONG_TIMEOUT', ack: 0 });
    expect(publicService.websocket('ping_failed')).toEqual({ end: 'ping_failed', reason: 'WORKHORSE_WEBSOCKET_PING_FAILED', ack: 0 });
  });

  it.each([
    ['CUSTOMER_CANCELLED', 'CUSTOMER_CANCELLED'],
    [null, 'USER_STOP'],
    ['lower case', 'USER_STOP'],
    ['WORKHORSE_RUN_LIMIT', 'USER_STOP'],
    ['WORKHORSE_SERVER_SHUTDOWN', 'USER_STOP'],
    ['MY_INFRA_WORD', 'USER_STOP'],
  ])('a stop key of %j is sent as %s: never an infrastructure word, Workhorse’s or the service’s', (value, sent) => {
    expect(widerService.user(value)).toEqual({ end: 'stop_requested', reason: sent, ack: 0 });
  });
});
