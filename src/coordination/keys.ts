/** Redis keys shared with Workhorse (SPEC §5): a mixed fleet stays exclusive. */
export const lockKey = (workflowId: string): string => `workhorse:duoworkflow:lock:${workflowId}`;
export const stopKey = (workflowId: string): string => `workhorse:duoworkflow:stop:${workflowId}`;
export const runKey = (workflowId: string): string => `workhorse:duoworkflow:run:${workflowId}`;
