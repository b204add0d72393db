-- The owner's stop request (docs/spec.md §5): sets the stop key only while a run holds the lock.
-- KEYS[1]  lock key  workhorse:duoworkflow:lock:<workflow_id>
-- KEYS[2]  stop key  workhorse:duoworkflow:stop:<workflow_id>
-- ARGV[1]  the stop value (a reason token)
-- ARGV[2]  stop key TTL in milliseconds
-- ARGV[3]  pub/sub channel to announce the workflow id on
-- ARGV[4]  the workflow id
-- Returns  1 when a run holds the lock (the key is set and announced), 0 when none does
--          (nothing is set).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
