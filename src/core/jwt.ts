/**
 * The HS256 JWTs shared with the owner service (docs/spec.md §2, §6): longrun signs
 * `Gitlab-Workhorse-Api-Request` with iss "gitlab-workhorse"; the owner signs calls to
 * the internal routes with iss "gitlab", for one workflow and for at most five minutes.
 */
import { SignJWT, jwtVerify } from 'jose';

export const WORKHORSE_ISSUER = 'gitlab-workhorse';
export const OWNER_ISSUER = 'gitlab';
/** The longest life (exp − iat) of an owner token the internal routes accept. */
const OWNER_TOKEN_MAX_LIFETIME_S = 300;
/** Clock skew tolerated between the owner and longrun when checking exp and iat. */
const CLOCK_TOLERANCE_S = 60;

/** Signs a short JWT with `iss` and `iat: now` (what Workhorse sends). */
export async function signJwt(secret: Uint8Array, issuer: string): Promise<string> {
  return new SignJWT({}).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuer(issuer).setIssuedAt().sign(secret);
}

/** Claims of an owner token; a test sets odd ones to check they are refused. */
export interface OwnerTokenClaims {
  /** The workflow the token is for; default the one given. Any JSON value, to test refusals. */
  workflow_id?: unknown;
  /** Seconds since the epoch; default now. `null` leaves the claim out. */
  iat?: number | null;
  /** Seconds since the epoch; default iat + 60. `null` leaves the claim out. */
  exp?: number | null;
  iss?: string;
}

/**
 * Signs an owner → longrun token (what the owner sends to the internal routes, docs/spec.md §6):
 * iss "gitlab", `workflow_id`, iat now, exp one minute later. Used by tests, benchmarks
 * and the sandbox's owner.
 */
export async function signOwnerJwt(secret: Uint8Array, workflowId: string, claims: OwnerTokenClaims = {}): Promise<string> {
  const iat = claims.iat === undefined ? Math.floor(Date.now() / 1000) : claims.iat;
  const exp = claims.exp === undefined ? (iat ?? Math.floor(Date.now() / 1000)) + 60 : claims.exp;
  const payload: Record<string, unknown> = { iss: claims.iss ?? OWNER_ISSUER, workflow_id: 'workflow_id' in claims ? claims.workflow_id : workflowId };
  if (iat !== null) payload['iat'] = iat;
  if (exp !== null) payload['exp'] = exp;
  return new SignJWT(payload).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(secret);
}

/**
 * True when `token` lets the owner act on `workflowId` (docs/spec.md §6): HS256 with `secret`,
 * iss "gitlab", a string `workflow_id` equal to `workflowId`, `iat` and `exp` both
 * present, exp − iat at most five minutes, and now within [iat, exp] (60 s of skew
 * tolerated). A token for one workflow never acts on another.
 */
export async function verifyOwnerJwt(secret: Uint8Array, token: string, workflowId: string): Promise<boolean> {
  try {
    const { payload } = await jwtVerify(token, secret, {
      algorithms: ['HS256'],
      issuer: OWNER_ISSUER,
      requiredClaims: ['iat', 'exp', 'workflow_id'],
      // Also refuses an iat in the future (beyond the tolerance).
      maxTokenAge: OWNER_TOKEN_MAX_LIFETIME_S,
      clockTolerance: CLOCK_TOLERANCE_S,
    });
    const { iat, exp } = payload as { iat: number; exp: number };
    return typeof payload['workflow_id'] === 'string' && payload['workflow_id'] === workflowId && exp > iat && exp - iat <= OWNER_TOKEN_MAX_LIFETIME_S;
  } catch {
    return false;
  }
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
  /** `token` once signed, kept as a string for current(). */
  private signed: string | undefined;
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
      this.signed = undefined;
      const token = signJwt(this.secret, this.issuer);
      this.token = token;
      void token.then(
        (signed) => {
          if (this.token === token) this.signed = signed;
        },
        () => undefined,
      );
    }
    return this.token;
  }

  /**
   * The token get() would resolve with, when it is signed and fresh; else undefined (call
   * get()). Spares the hot path (one relayed request per action) a wait on a promise.
   */
  current(): string | undefined {
    return this.signed !== undefined && Date.now() - this.signedAt <= this.refreshMs ? this.signed : undefined;
  }
}
