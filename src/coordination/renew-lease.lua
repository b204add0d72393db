-- Renews a workflow's lease and reads its stop flag in one round trip (SPEC §5).
-- KEYS[1]  lock key   workhorse:duoworkflow:lock:<workflow_id>
-- KEYS[2]  stop key   workhorse:duoworkflow:stop:<workflow_id>
-- KEYS[3]  run record workhorse:duoworkflow:run:<workflow_id>
-- ARGV[1]  the run's lock token
-- ARGV[2]  lease TTL in milliseconds
-- ARGV[3]  the run's id
-- ARGV[4]  the run's state
-- ARGV[5]  the run's last action time (ISO 8601, or "")
-- ARGV[6]  optional: the run's unanswered relayed actions (JSON list) for the record's in_flight
-- Returns  { owned, stop }: owned is 1 when the token still held the lock (the lock and,
--          if it is this run's, the run record now live ARGV[2] ms more) and 0 when it is
--          gone or held by another token (nothing is changed); stop is the stop key's
--          value, or "" when it is not set.
local owned = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if redis.call('HGET', KEYS[3], 'run_id') == ARGV[3] then
    redis.call('HSET', KEYS[3], 'state', ARGV[4], 'last_action_at', ARGV[5])
    if ARGV[6] then
      redis.call('HSET', KEYS[3], 'in_flight', ARGV[6])
    end
    redis.call('PEXPIRE', KEYS[3], ARGV[2])
  end
  owned = 1
end
local stop = redis.call('GET', KEYS[2])
if not stop then
  stop = ''
end
return { owned, stop }
