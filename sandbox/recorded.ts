/**
 * What the simulators record for assertions, bounded: each list keeps its latest `limit`
 * entries, so a sandbox left running for days stays the size it was after its first few
 * thousand turns. Tests keep the default, far above what any of them records.
 */

/** The default bound of each recorded list (a test records a few thousand entries at most). */
export const RECORD_LIMIT = 100_000;

/** Appends `item`, dropping the oldest entries past `limit` (in steps of a tenth: one splice per limit/10 records). */
export function record<T>(list: T[], item: T, limit: number): void {
  list.push(item);
  if (list.length > limit + Math.ceil(limit / 10)) list.splice(0, list.length - limit);
}

/** Sets `key` in a map kept to its latest `limit` keys (insertion order: the oldest go first). */
export function remember<K, V>(map: Map<K, V>, key: K, value: V, limit: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > limit) map.delete(map.keys().next().value as K);
}
