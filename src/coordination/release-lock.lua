-- Compare-and-delete release of a run's lock, run record and stop key (SPEC §5).
-- KEYS[1]  lock key   workhorse:duoworkflow:lock:<workflow_id>
-- KEYS[2]  run record workhorse:duoworkflow:run:<workflow_id>
-- KEYS[3]  stop key   workhorse:duoworkflow:stop:<workflow_id>
-- ARGV[1]  the run's lock token
-- ARGV[2]  the run's id
-- Returns  1 when the token held the lock and it was deleted, 0 otherwise. The run record
--          is deleted only when it is this run's; the stop key only when the lock was
--          ours (a stop meant for a later holder is left alone).
if redis.call('HGET', KEYS[2], 'run_id') == ARGV[2] then
  redis.call('DEL', KEYS[2])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[3])
  return 1
end
return 0
