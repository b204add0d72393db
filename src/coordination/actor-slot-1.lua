-- Takes one of an actor's run slots, across replicas (docs/spec.md §3b per-actor cap).
-- KEYS[1]  actor set  longrun:actor:<actor_id> (sorted set: member → expiry, ms since epoch)
-- ARGV[1]  the member (the run's lock token)
-- ARGV[2]  the cap (max members)
-- ARGV[3]  TTL in milliseconds (the lease TTL; renewals push the expiry on)
-- Returns  1 when the slot was taken (or already held by the member), 0 when the actor is
--          at the cap. Expired members (a replica died) are dropped first, so nothing leaks.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
