-- Renews a workflow's lease and reads its stop flag in one round trip (SPEC §5).
-- KEYS[1]  lock key  workhorse:duoworkflow:lock:<workflow_id>
-- KEYS[2]  stop key  workhorse:duoworkflow:stop:<workflow_id>
-- ARGV[1]  the run's lock token
-- ARGV[2]  lease TTL in milliseconds
-- Returns  { owned, stop }: owned is 1 when the token still held the lock (its TTL is
--          now ARGV[2]) and 0 when it is gone or held by another token (nothing is
--          changed); stop is the stop key's value, or "" when it is not set.
local owned = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  owned = 1
end
local stop = redis.call('GET', KEYS[2])
if not stop then
  stop = ''
end
return { owned, stop }
