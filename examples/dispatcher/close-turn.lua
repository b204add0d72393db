-- Ends a turn without a run end to go by (stopped before acceptance, refused for good,
-- given up on), once.
-- KEYS[1]  turn hash   <prefix>:turn:<workflow_id>
-- ARGV[1]  status: stopped or failed
-- ARGV[2]  reason (a segment-end reason or an error code)
-- ARGV[3]  now (ms since the epoch)
-- Returns  1 when the turn ended now, 0 when it had already ended.
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'dispatching' and status ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'ended_reason', ARGV[2], 'ended_at', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'finals', 1)
return 1
