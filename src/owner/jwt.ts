/**
 * The HS256 JWTs shared with the owner service (SPEC §2, §6): longrun signs
 * `Gitlab-Workhorse-Api-Request` with iss "gitlab-workhorse"; the owner signs calls to
 * the internal routes with iss "gitlab".
 */
import { SignJWT, jwtVerify } from 'jose';

export const WORKHORSE_ISSUER = 'gitlab-workhorse';
export const OWNER_ISSUER = 'gitlab';

/** Signs a short JWT with `iss` and `iat: now` (what Workhorse sends). */
export async function signJwt(secret: Uint8Array, issuer: string): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(issuer)
    .setIssuedAt()
    .sign(secret);
}

/** True when `token` is an HS256 JWT signed with `secret` and issued by `issuer`. */
export async function verifyJwt(secret: Uint8Array, token: string, issuer: string): Promise<boolean> {
  try {
    await jwtVerify(token, secret, { algorithms: ['HS256'], issuer, clockTolerance: 60 });
    return true;
  } catch {
    return false;
  }
}

/**
 * Caches the signed token for `refreshMs`: signing per relayed request would be wasted
 * CPU on the hot path, and the owner only checks signature, issuer and a fresh-enough iat.
 */
export class JwtSigner {
  private token: Promise<string> | undefined;
  private signedAt = 0;

  constructor(
    private readonly secret: Uint8Array,
    private readonly issuer: string = WORKHORSE_ISSUER,
    private readonly refreshMs = 30_000,
  ) {}

  get(): Promise<string> {
    const now = Date.now();
    if (!this.token || now - this.signedAt > this.refreshMs) {
      this.signedAt = now;
      this.token = signJwt(this.secret, this.issuer);
    }
    return this.token;
  }
}
