-- Takes a workflow's lock for a new run (docs/spec.md §5) and clears a stale stop key, in one
-- round trip; refused while the store fence is up (store-fence.lua, loaded before this).
-- KEYS[1]  lock key  workhorse:duoworkflow:lock:<workflow_id>
-- KEYS[2]  stop key  workhorse:duoworkflow:stop:<workflow_id>
-- ARGV[1]  the run's lock token
-- ARGV[2]  lease TTL in milliseconds
-- ARGV[3]  the store marker of this primary (src/redis/keys.ts `storeMarker`)
-- Returns  1 when the lock was free and is now the token's (the stop key, which then
--          addressed no run in flight, is deleted), 0 when another token holds it
--          (nothing is changed), or {why, N} when it is free but the store fence is up:
--          no lock is granted for N more milliseconds, why being `new` (a new store, not a
--          lease TTL old yet) or `lost` (the store lost its data); nothing is changed.
local fencedMs, why = storeFence(ARGV[3], ARGV[2], nil)
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if fencedMs > 0 then
  return { why, fencedMs }
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
