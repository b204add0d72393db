-- Releases many runs' locks in one round trip (docs/spec.md §5): for each, the compare-and-delete
-- of one release — the run record only when it is that run's, the lock and stop key only
-- when the token still holds the lock (a stop meant for a later holder is left alone) —
-- then removes the runs' actor slots.
--
-- Every key is passed in ARGV, as in renew-leases-1.lua: in a Redis Cluster one call
-- carries the locks of many slots served by one primary; KEYS[1] only routes it there.
--
-- KEYS[1]  any key of the batch (the first lock key): where the call is sent
-- ARGV[1]  n, the number of locks
-- ARGV[2]  m, the number of actor slots to remove
-- then n groups of 5 arguments, one per lock:
--          lock key, run record key, stop key, lock token, run id ("" for none)
-- then m groups of 2 arguments: actor set key, member (the lock token)
-- Returns  an array of n values: 1 when the token held the lock and it was deleted,
--          0 otherwise (nothing of that lock was changed but its run's own record).
local n = tonumber(ARGV[1])
local m = tonumber(ARGV[2])
local out = {}
local at = 3
for i = 1, n do
  local lock, run, stop, token, runId = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  if runId ~= '' and redis.call('HGET', run, 'run_id') == runId then
    redis.call('DEL', run)
  end
  if redis.call('GET', lock) == token then
    redis.call('DEL', lock, stop)
    out[i] = 1
  else
    out[i] = 0
  end
  at = at + 5
end
for j = 1, m do
  redis.call('ZREM', ARGV[at], ARGV[at + 1])
  at = at + 2
end
return out
