-- Records that a run of the turn was accepted (or adopted after a 409 WORKFLOW_LOCKED):
-- the turn's current run becomes it, once.
-- KEYS[1]  turn hash   <prefix>:turn:<workflow_id>
-- KEYS[2]  run hash    <prefix>:run:<run_id>
-- ARGV[1]  run id
-- ARGV[2]  workflow id
-- ARGV[3]  segment number (0 for the turn's first)
-- ARGV[4]  now (ms since the epoch)
-- ARGV[5]  "1" when the run resumes an earlier segment, else "0"
-- Returns  1 when recorded now, 0 when the run was already the turn's (nothing changed).
if redis.call('HSETNX', KEYS[2], 'ours', '1') == 0 then
  return 0
end
redis.call('HSET', KEYS[2], 'workflow_id', ARGV[2], 'segment', ARGV[3], 'accepted_at', ARGV[4])
redis.call('HINCRBY', KEYS[1], 'segments', 1)
if ARGV[5] == '1' then
  redis.call('HINCRBY', KEYS[1], 'resumes', 1)
end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'dispatching' or status == 'running' then
  redis.call('HSET', KEYS[1], 'run_id', ARGV[1], 'status', 'running')
end
return 1
