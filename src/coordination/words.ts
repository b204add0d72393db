/**
 * The coordination store's word lists (docs/spec.md §5, §7): what its lock operations and
 * lease batches are labelled with in metrics and logs. Its Redis connections' words are
 * src/redis/words.ts.
 */

/** Lock operations and their results; only the pairs in `lockOutcomes` happen. */
export const lockOps = ['acquire', 'renew', 'release'] as const;
export type LockOp = (typeof lockOps)[number];
/**
 * `fenced`: refused, the store having lost its data moments ago (store-fence.lua);
 * `reasserted`: a lock the store had lost re-created by its holder's renewal.
 */
export const lockResults = ['ok', 'taken', 'lost', 'error', 'fenced', 'reasserted'] as const;
export type LockResult = (typeof lockResults)[number];
export const lockOutcomes: ReadonlyArray<readonly [LockOp, LockResult]> = [
  ['acquire', 'ok'],
  ['acquire', 'taken'],
  ['acquire', 'fenced'],
  ['acquire', 'error'],
  ['renew', 'ok'],
  ['renew', 'reasserted'],
  ['renew', 'lost'],
  ['renew', 'error'],
  ['release', 'ok'],
  ['release', 'error'],
];

/** What the lease keeper batches: renewals each tick, releases each turn of the event loop. */
export const leaseBatchOps = ['renew', 'release'] as const;
export type LeaseBatchOp = (typeof leaseBatchOps)[number];
