-- Compare-and-delete release of a workflow's lock (SPEC §5).
-- KEYS[1]  lock key  workhorse:duoworkflow:lock:<workflow_id>
-- ARGV[1]  the run's lock token
-- Returns  1 when the token held the lock and it was deleted, 0 when it was not held
--          by this token (expired or taken over: nothing is deleted).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
