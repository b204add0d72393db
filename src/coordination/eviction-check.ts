/**
 * The Redis check made once at start (docs/spec.md §5): may this Redis evict a lock key? With
 * any `maxmemory-policy` but `noeviction`, Redis under memory pressure deletes keys to make
 * room — a workflow's lock among them — and a second call of that workflow then starts
 * beside the first. BullMQ and Sidekiq warn at start for exactly this. longrun reads the
 * policy (never changes it: the server is often shared) from each primary's `INFO memory`,
 * which the store fence needs anyway, so CONFIG may be renamed or refused (as on managed
 * services) and the check still runs. Where INFO is refused too, the check is skipped and
 * says so.
 */
import type { Redis } from 'ioredis';

/** Redis's eviction policies (redis.conf `maxmemory-policy`); a server's other answer is `other`. */
export const maxmemoryPolicies = ['noeviction', 'allkeys-lru', 'allkeys-lfu', 'allkeys-random', 'volatile-lru', 'volatile-lfu', 'volatile-random', 'volatile-ttl'] as const;
export type MaxmemoryPolicy = (typeof maxmemoryPolicies)[number];
/** A primary's policy as a metric label: `unknown` when it could not be read. */
export type PolicyLabel = MaxmemoryPolicy | 'other' | 'unknown';

/** One primary's answer. */
export interface PrimaryPolicy {
  primary: string;
  policy: PolicyLabel;
  /** The policy as the server named it (for the log), when read. */
  named?: string;
  /** Why it could not be read. */
  error?: string;
}

/** Reads `maxmemory_policy` from INFO memory; a refusal (ACL, a renamed INFO) or a missing field is `unknown`. */
export async function readPolicy(primary: string, client: Pick<Redis, 'info'>): Promise<PrimaryPolicy> {
  let info: string;
  try {
    info = await client.info('memory');
  } catch (err) {
    return { primary, policy: 'unknown', error: (err as Error).message };
  }
  const named = /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
  if (named === undefined) return { primary, policy: 'unknown', error: 'INFO memory has no maxmemory_policy' };
  return { primary, policy: (maxmemoryPolicies as readonly string[]).includes(named) ? (named as MaxmemoryPolicy) : 'other', named };
}

/** What the check says of one primary, at which level: null when all is well. */
export function verdict(result: PrimaryPolicy): { level: 'warn'; message: string } | null {
  if (result.policy === 'noeviction') return null;
  if (result.policy === 'unknown') {
    return {
      level: 'warn',
      message: `redis maxmemory-policy check skipped: it could not be read (${result.error ?? 'no answer'}); make sure it is noeviction — another policy may evict a lock key and start a second call of its workflow`,
    };
  }
  return {
    level: 'warn',
    message: `redis maxmemory-policy is ${result.named ?? result.policy}, not noeviction: under memory pressure Redis may evict a workflow's lock key and a second call of that workflow starts beside the first; set maxmemory-policy noeviction (longrun never changes it)`,
  };
}
