/**
 * The words longrun stops runs with (docs/spec.md §4): the infrastructure reasons are
 * configurable, so a workflow service whose allowlist lacks WORKHORSE_RUN_LIMIT (the
 * public one today) can be sent a word it does allow and keep the workflow resumable;
 * what happened is recorded as what it was, whatever word was sent.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Step } from '../../src/sandbox/scenario';
import { StopReasons } from '../../src/run/stop-reasons';
import { startStack, type Stack } from '../helpers/stack';

let stack: Stack | undefined;

afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** What the public workflow service allowlists today (docs/spec.md §4). */
const publicAllowlist = ['WORKHORSE_SERVER_SHUTDOWN', 'WORKHORSE_WEBSOCKET_PING_FAILED', 'WORKHORSE_WEBSOCKET_PONG_TIMEOUT'];
const held: Step[] = [{ op: 'checkpoint', text: 'working' }, { op: 'hang' }];

async function runLimitOn(env: Record<string, string>): Promise<{ sent: string[]; ended: string | undefined; reason: string | undefined }> {
  stack = await startStack({ preauth: { detached: true }, workflow: { infraStopReasons: publicAllowlist }, env: { LONGRUN_RUN_LIMIT_MS: '400', ...env } });
  expect((await stack.executeText('910', { steps: held })).status).toBe(202);
  await stack.owner.waitFor(() => stack!.owner.segmentEnds.length === 1, 5_000, 'segment end');
  const call = stack.workflow.callsFor('910')[0];
  return { sent: call?.stopReasons ?? [], ended: call?.ended?.code ?? call?.ended?.how, reason: stack.owner.segmentEnds[0]?.reason };
}

describe('infrastructure stop reasons', () => {
  it('by default the run limit sends WORKHORSE_RUN_LIMIT: a service without it in its allowlist ends the call as a user stop', async () => {
    const { sent, ended, reason } = await runLimitOn({});
    expect(sent).toEqual(['WORKHORSE_RUN_LIMIT']);
    expect(ended).toBe('ok');
    expect(reason).toBe('run_limit');
  });

  it('LONGRUN_STOP_REASON_RUN_LIMIT=WORKHORSE_SERVER_SHUTDOWN: the same service acknowledges (the workflow stays resumable), recorded as run_limit', async () => {
    const { sent, ended, reason } = await runLimitOn({ LONGRUN_STOP_REASON_RUN_LIMIT: 'WORKHORSE_SERVER_SHUTDOWN' });
    expect(sent).toEqual(['WORKHORSE_SERVER_SHUTDOWN']);
    expect(ended).toBe('UNAVAILABLE');
    expect(reason).toBe('run_limit');
    expect(stack!.logs()).toMatch(/"msg":"run ended".*"reason":"run_limit".*"stop_outcome":"ack"|"reason":"run_limit".*"stop_outcome":"ack".*"msg":"run ended"/);
  });
});

describe('the owner’s stop reason', () => {
  const reasons = new StopReasons({ drain: 'WORKHORSE_SERVER_SHUTDOWN', run_limit: 'MY_INFRA_LIMIT', lock_lost: 'WORKHORSE_LOCK_LOST' });

  it.each([
    ['CUSTOMER_CANCELLED', 'CUSTOMER_CANCELLED'],
    [null, 'USER_STOP'],
    ['lower case', 'USER_STOP'],
    ['WORKHORSE_RUN_LIMIT', 'USER_STOP'],
    ['MY_INFRA_LIMIT', 'USER_STOP'],
  ])('a stop key of %j is sent as %s: never an infrastructure word, default or configured', (value, sent) => {
    expect(reasons.user(value)).toEqual({ end: 'stop_requested', reason: sent });
  });

  it('longrun’s own stops carry their configured words and their own end reasons', () => {
    expect(reasons.infra('run_limit')).toEqual({ end: 'run_limit', reason: 'MY_INFRA_LIMIT' });
    expect(reasons.infra('drain')).toEqual({ end: 'drain', reason: 'WORKHORSE_SERVER_SHUTDOWN' });
  });
});
