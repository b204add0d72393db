/**
 * The two HS256 JWTs between the gateway and the owner side, signed with the shared secret
 * (the 32 bytes of Workhorse's secret file). Their claims are a wire contract with the
 * owner service and the gateway (docs/spec.md §2, §6; docs/owner-integration.md §1, §6),
 * which checks and signs them in its own src/core/jwt.ts: a change here is a change of
 * that contract.
 *
 *   owner → gateway   `Authorization: Bearer` on the internal routes: iss "gitlab",
 *                     `workflow_id` (a string, the path's), `iat`, `exp` at most five
 *                     minutes after it. The client signs a one-minute token per call.
 *   gateway → owner   `Gitlab-Workhorse-Api-Request` on the segment-end callback:
 *                     iss "gitlab-workhorse", `iat`: at most 90 s old by default, as Rails'
 *                     Gitlab::Workhorse.verify_api_request! takes it (API_REQUEST_JWT_VALIDITY).
 *                     The gateway re-signs its token every LONGRUN_JWT_REFRESH_MS (30 s,
 *                     at most 60 s) and each callback attempt takes the current one.
 */
import { SignJWT, jwtVerify } from 'jose';

/** The issuer of the tokens the gateway signs (Workhorse's). */
export const GATEWAY_ISSUER = 'gitlab-workhorse';
/** The issuer of the tokens the owner signs for the internal routes (Rails'). */
export const OWNER_ISSUER = 'gitlab';

/** The claims of an owner token for one workflow. */
export interface OwnerTokenClaims {
  iss: typeof OWNER_ISSUER;
  workflow_id: string;
  /** Seconds since the epoch. */
  iat: number;
  /** Seconds since the epoch; the gateway accepts at most iat + 300. */
  exp: number;
}

/** How long a token the client signs lives: the internal routes accept up to five minutes. */
const OWNER_TOKEN_LIFETIME_S = 60;
/** Clock skew tolerated between the gateway and the owner when checking a gateway token's exp, nbf and a future iat. */
const CLOCK_TOLERANCE_S = 60;
/**
 * The oldest `iat` a gateway token may have, in seconds: Rails refuses a
 * Gitlab-Workhorse-Api-Request issued more than 90 s ago, which caps the replay value of a
 * leaked token. Checked without the clock tolerance, as Rails checks it.
 */
export const GATEWAY_TOKEN_MAX_AGE_S = 90;

export interface GatewayTokenOptions {
  /**
   * The oldest `iat` accepted, in seconds before now (default GATEWAY_TOKEN_MAX_AGE_S, 90, as
   * Rails). `Infinity` accepts a token of any age: only for an owner whose clock cannot be
   * trusted within a minute of the gateway's, since it lets a leaked token be replayed.
   */
  maxAgeS?: number;
  /** Now, in ms since the epoch (tests); default Date.now(). */
  nowMs?: number;
}

/** Signs an owner token for `workflowId`, valid from now for one minute. */
export async function signOwnerToken(secret: Uint8Array, workflowId: string): Promise<string> {
  const iat = Math.floor(Date.now() / 1_000);
  const claims: OwnerTokenClaims = { iss: OWNER_ISSUER, workflow_id: workflowId, iat, exp: iat + OWNER_TOKEN_LIFETIME_S };
  return new SignJWT({ ...claims }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(secret);
}

/**
 * True when `token` is an HS256 JWT signed with `secret` and issued by the gateway, with an
 * `iat` no more than `maxAgeS` old (default 90 s) and not in the future (beyond 60 s of
 * skew); `exp` and `nbf`, when present, hold with 60 s of skew. Throws RangeError for a
 * `maxAgeS` that is not a positive number.
 */
export async function verifyGatewayToken(secret: Uint8Array, token: string, options: GatewayTokenOptions = {}): Promise<boolean> {
  const maxAgeS = options.maxAgeS ?? GATEWAY_TOKEN_MAX_AGE_S;
  if (!(maxAgeS > 0)) throw new RangeError(`maxAgeS must be a positive number of seconds, got ${maxAgeS}`);
  const nowS = (options.nowMs ?? Date.now()) / 1_000;
  try {
    const { payload } = await jwtVerify(token, secret, {
      algorithms: ['HS256'],
      issuer: GATEWAY_ISSUER,
      requiredClaims: ['iat'],
      clockTolerance: CLOCK_TOLERANCE_S,
      currentDate: new Date(nowS * 1_000),
    });
    const iat = payload.iat as number;
    // jose's maxTokenAge would add the clock tolerance to the age; Rails does not.
    return iat <= nowS + CLOCK_TOLERANCE_S && iat >= nowS - maxAgeS;
  } catch {
    return false;
  }
}
