/** What longrun's Redis connections report (longrun_redis_connection_events_total, logs). */

/** The coordination store's connections: commands, and the subscriber of stop notices. */
export const redisConnections = ['commands', 'subscriber'] as const;
export type RedisConnection = (typeof redisConnections)[number];
export const redisEvents = ['ready', 'error', 'reconnecting', 'end'] as const;
export type RedisEvent = (typeof redisEvents)[number];
