/**
 * Rails rate-limits the execute preauth (`check_rate_limit!(:duo_workflow_direct_access, scope:
 * current_user)`: 50 a minute a user, 429 with Retry-After the interval). longrun passes the
 * 429 through with its Retry-After and body, starting nothing; @longrun/client's execute waits
 * it out and tries again, or, when the wait ends past its deadline, throws at once with the
 * wait for its caller (a job queue) to honour. The owner simulator limits as Rails does.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { LongrunClient, LongrunError, systemClock, type RetryClock } from '@longrun/client';
import { RAILS_EXECUTE_RATE_LIMIT, RATE_LIMITED_BODY } from '../../sandbox/owner-sim';
import { scenarioMetadata, type Step } from '../../sandbox/scenario';
import { startStack, type Stack } from '../../stack';

let stack: Stack | undefined;
const clients: LongrunClient[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await stack?.close();
  stack = undefined;
});

const quick: Step[] = [{ op: 'checkpoint', text: 'done', status: 'FINISHED' }, { op: 'end' }];
const body = { goal: 'go', workflowMetadata: scenarioMetadata(quick) };
const USER = { authorization: 'Bearer user-one' };

/** The system clock, recording each wait the retry loop makes (it really waits). */
function recordingClock(): { clock: RetryClock; waits: number[] } {
  const waits: number[] = [];
  return {
    waits,
    clock: {
      ...systemClock,
      sleep: (ms, signal) => {
        waits.push(ms);
        return systemClock.sleep(ms, signal);
      },
    },
  };
}

describe('the execute preauth’s rate limit', () => {
  it('is Rails’ 50 a minute a user, and its 429 is passed through with Retry-After and Rails’ body; nothing is started', async () => {
    stack = await startStack({ preauth: { detached: true }, env: { LONGRUN_LOG_LEVEL: 'warn' } });
    stack.owner.executeRateLimit = RAILS_EXECUTE_RATE_LIMIT;
    for (let i = 0; i < 50; i++) expect((await stack.execute(String(5600 + i), { body, headers: USER })).statusCode).toBe(202);
    const refused = await stack.executeText('5500', { body, headers: USER });
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('60');
    expect(refused.headers['x-longrun-error-code']).toBe('PREAUTH_DENIED');
    expect(refused.text).toBe(RATE_LIMITED_BODY);
    expect(stack.workflow.callsFor('5500')).toEqual([]);
    // Per user: another user's execute is not limited.
    expect((await stack.execute('5500', { body, headers: { authorization: 'Bearer user-two' } })).statusCode).toBe(202);
  });

  it('the client waits Retry-After out, then tries again: one refused preauth, one accepted, a second apart at least', async () => {
    stack = await startStack({ preauth: { detached: true }, env: { LONGRUN_LOG_LEVEL: 'warn' } });
    stack.owner.executeRateLimit = { threshold: 1, intervalMs: 1_000 };
    expect((await stack.execute('5501', { body, headers: USER })).statusCode).toBe(202);
    const { clock, waits } = recordingClock();
    const client = new LongrunClient({ url: stack.url, headers: USER, clock });
    clients.push(client);
    const result = await client.execute('5502', body);
    expect(result).toMatchObject({ kind: 'accepted', attempts: 2 });
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThanOrEqual(1_000);
    const asked = stack.owner.preauths.filter((p) => p.path.includes('/5502/'));
    expect(asked).toHaveLength(2);
    expect((asked[1]?.at ?? 0) - (asked[0]?.at ?? 0)).toBeGreaterThanOrEqual(1_000);
  });

  it('a Retry-After past the client’s deadline: thrown at once, retryable, with the wait for the caller', async () => {
    stack = await startStack({ preauth: { detached: true }, env: { LONGRUN_LOG_LEVEL: 'warn' } });
    stack.owner.executeRateLimit = { threshold: 1, intervalMs: 60_000 };
    expect((await stack.execute('5503', { body, headers: USER })).statusCode).toBe(202);
    const { clock, waits } = recordingClock();
    const client = new LongrunClient({ url: stack.url, headers: USER, clock, retry: { deadlineMs: 5_000 } });
    clients.push(client);
    const err = await client.execute('5504', body).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(LongrunError);
    expect(err).toMatchObject({ code: 'PREAUTH_DENIED', status: 429, retryable: true, retryAfterS: 60, attempts: 1, body: RATE_LIMITED_BODY });
    expect(waits).toEqual([]);
    expect(stack.workflow.callsFor('5504')).toEqual([]);
  });
});
