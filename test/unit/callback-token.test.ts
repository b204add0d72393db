/**
 * The segment-end callback's Gitlab-Workhorse-Api-Request token stays fresh enough for Rails
 * (Gitlab::Workhorse.verify_api_request! refuses an iat more than 90 s old, and so does
 * @longrun/client's verifySegmentEnd by default): the gateway re-signs its token every
 * LONGRUN_JWT_REFRESH_MS, and each attempt of a retried callback takes the token current when
 * it is sent, not the one of the first attempt. A real owner simulator, the real OwnerClient.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { verifySegmentEnd, type SegmentEnd } from '@longrun/client';
import { OwnerServiceSimulator } from '../../sandbox/owner-sim';
import { OwnerClient } from '../../src/owner/owner-client';
import { testSecret } from '../../stack/secret';

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const end: SegmentEnd = { workflow_id: '77', run_id: 'run-77', reason: 'run_limit', segment_duration_s: 2, actions: 1, in_flight: [] };

describe('the callback token of each attempt', () => {
  it('an attempt sent after the first timed out carries a token signed since, which the owner’s 90 s check takes', async () => {
    const owner = await OwnerServiceSimulator.start({ secret: testSecret, workflowServiceUri: '127.0.0.1:1' });
    closers.push(() => owner.close());
    const attempts: Array<{ atS: number; token: string; verified: boolean }> = [];
    // The owner's endpoint: the first attempt is never answered (the gateway's deadline ends it),
    // the second answered 503, the third reaches the simulator's own route (204).
    owner.use((req, res, next) => {
      if (!req.path.endsWith('/segment_end')) return next();
      const token = req.get('gitlab-workhorse-api-request') ?? '';
      const attempt = { atS: Date.now() / 1_000, token, verified: false };
      attempts.push(attempt);
      void verifySegmentEnd(testSecret, { headers: req.headers, body: req.body as string, workflowId: '77' }).then(
        () => (attempt.verified = true),
        () => (attempt.verified = false),
      );
      if (attempts.length === 1) return;
      if (attempts.length === 2) return void res.status(503).json({ message: 'busy' });
      next();
    });
    const refreshMs = 300;
    const client = new OwnerClient({
      ownerUrl: new URL(owner.url),
      secret: testSecret,
      preauthTimeoutMs: 1_000,
      relayTimeoutMs: 1_000,
      connections: 4,
      callbackAttempts: 3,
      callbackTimeoutMs: 1_200,
      jwtRefreshMs: refreshMs,
    });
    closers.push(() => client.close());

    expect(await client.segmentEnd(end, 'callback-token-1', AbortSignal.timeout(10_000))).toBe('retried_ok');
    expect(owner.segmentEnds).toMatchObject([{ workflow_id: '77', run_id: 'run-77' }]);
    await expect.poll(() => attempts.filter((a) => a.verified).length).toBe(3);
    // The second attempt came more than the refresh period after the first: a token signed since.
    expect(attempts[1]!.atS - attempts[0]!.atS).toBeGreaterThan(refreshMs / 1_000);
    expect(attempts[1]!.token).not.toBe(attempts[0]!.token);
    for (const attempt of attempts) {
      const { iat } = decodeJwt(attempt.token);
      // iat is in whole seconds: at most the refresh period (and the rounding) old when it arrived.
      expect(attempt.atS - (iat as number)).toBeLessThan(refreshMs / 1_000 + 1);
      expect(attempt.atS - (iat as number)).toBeGreaterThanOrEqual(0);
    }
  });
});
