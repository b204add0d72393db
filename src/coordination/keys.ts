/** Redis keys (SPEC §5). Lock, stop and run keys are shared with Workhorse: a mixed fleet stays exclusive. */
export const lockKey = (workflowId: string): string => `workhorse:duoworkflow:lock:${workflowId}`;
export const stopKey = (workflowId: string): string => `workhorse:duoworkflow:stop:${workflowId}`;
export const runKey = (workflowId: string): string => `workhorse:duoworkflow:run:${workflowId}`;
export const actorKey = (actorId: string): string => `longrun:actor:${actorId}`;
/** Channel the stop endpoint publishes workflow ids on (keyspace notices may also arrive). */
export const STOP_CHANNEL = 'longrun:stop';
export const STOP_KEY_PREFIX = 'workhorse:duoworkflow:stop:';
