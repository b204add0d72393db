/**
 * Where a workflow's lock lives: Redis (shared by replicas) or this process (the
 * embedded default). Both keep the same semantics: SET NX PX with a random token,
 * renewal only while the token matches, compare-and-delete release.
 */

/** One atomic observation made by a renewal: "I still own it" and "I should stop". */
export interface RenewResult {
  owned: boolean;
  /** The stop key's value when the owner asked this workflow's run to stop, else null. */
  stop: string | null;
}

/** Thrown for a backend failure (Redis unreachable or erroring), as opposed to "taken". */
export class LockBackendError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LockBackendError';
  }
}

export interface LockBackend {
  readonly kind: 'redis' | 'memory';
  /** Takes the lock for ttlMs when free; false when another token holds it. Throws LockBackendError. */
  acquire(workflowId: string, token: string, ttlMs: number): Promise<boolean>;
  /** Extends the lease only while `token` still holds it, and reads the stop flag. Throws LockBackendError. */
  renew(workflowId: string, token: string, ttlMs: number): Promise<RenewResult>;
  /** Deletes the lock only when `token` still holds it. Throws LockBackendError. */
  release(workflowId: string, token: string): Promise<void>;
  close(): Promise<void>;
}
