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
 *                     iss "gitlab-workhorse", `iat`.
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
/** Clock skew tolerated between the gateway and the owner when checking a gateway token. */
const CLOCK_TOLERANCE_S = 60;

/** Signs an owner token for `workflowId`, valid from now for one minute. */
export async function signOwnerToken(secret: Uint8Array, workflowId: string): Promise<string> {
  const iat = Math.floor(Date.now() / 1_000);
  const claims: OwnerTokenClaims = { iss: OWNER_ISSUER, workflow_id: workflowId, iat, exp: iat + OWNER_TOKEN_LIFETIME_S };
  return new SignJWT({ ...claims }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(secret);
}

/** True when `token` is an HS256 JWT signed with `secret` and issued by the gateway. */
export async function verifyGatewayToken(secret: Uint8Array, token: string): Promise<boolean> {
  try {
    await jwtVerify(token, secret, { algorithms: ['HS256'], issuer: GATEWAY_ISSUER, clockTolerance: CLOCK_TOLERANCE_S });
    return true;
  } catch {
    return false;
  }
}
