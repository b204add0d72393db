-- Renews many leases in one round trip (docs/spec.md §5): for each, exactly what one renewal
-- does — extend the lock only while the token still holds it, refresh the run record
-- with it when the record is this run's, and read the stop flag in the same atomic
-- observation — then refreshes the actor slots of the leases that were still held.
--
-- While the store fence is up (store-fence.lua, loaded before this: the store lost its
-- data moments ago, or is new, and grants no new lock), a lock that is missing is
-- re-created for the token that asks: no one else can have taken it since the loss, and
-- the holder only renews a lease its own clock says is still alive. Its run goes on; its
-- run record, gone with the data, is rewritten by the holder (answer 2). Such a renewal
-- is what tells a store that lost its data from a new one (the fence's lossSeen).
--
-- The keys are built here from each lease's workflow id and the key scheme's names
-- (ARGV[4…9]), so a lease costs its id, not three key names: in a Redis Cluster one call
-- carries the leases of many slots served by one primary (keys of one workflow share a
-- hash tag, so one slot; the workflows of a batch do not). KEYS[1] only routes the call
-- to that primary; a key the primary does not serve (a slot that moved) fails the whole
-- call, which the lease keeper retries once the client has the new slot map.
--
-- KEYS[1]  any key of the batch (the first lease's lock key): where the call is sent
-- ARGV[1]  lease TTL in milliseconds
-- ARGV[2]  n, the number of leases
-- ARGV[3]  m, the number of actor slots to refresh
-- ARGV[4…9] the key names around a workflow id (src/redis/keys.ts `parts`):
--          lock prefix, lock suffix, stop prefix, stop suffix, run prefix, run suffix
-- ARGV[10] the store marker of this primary (src/redis/keys.ts `storeMarker`)
-- then n groups of 6 arguments, one per lease:
--          workflow id, lock token, run id, run state ("" when
--          no field changed since the record was last written: then only its TTL is
--          extended), last action time (ISO 8601, or ""), actions in flight (JSON text,
--          or "" to leave the record's in_flight as it is)
-- then m groups of 3 arguments, one per actor slot:
--          actor set key, member (the lock token), lease number (1..n: refreshed only if
--          that lease was still held; 0: refreshed, the caller having seen its lease held
--          in an earlier call — on a Cluster, where the actor set lives on another primary)
-- Returns  a flat array of 2n + 2 values: per lease, in order, owned (1 when the token
--          held the lock, which now lives ARGV[1] ms more; 2 when the lock was missing
--          under the fence and is the token's again, for ARGV[1] ms; 0 when it is gone or
--          another token's, and nothing of that lease was changed) and the stop key's
--          value ("" when it is not set); then the store fence of this primary: the
--          milliseconds it has left (0: none) and why (`new`, `lost`, or "").
local ttl = ARGV[1]
local n = tonumber(ARGV[2])
local m = tonumber(ARGV[3])
local lockPrefix, lockSuffix = ARGV[4], ARGV[5]
local stopPrefix, stopSuffix = ARGV[6], ARGV[7]
local runPrefix, runSuffix = ARGV[8], ARGV[9]
-- A lease of the batch whose lock this store lacks: its holder still counts on it.
local function lossSeen()
  local at = 11
  for _ = 1, n do
    if redis.call('EXISTS', lockPrefix .. ARGV[at] .. lockSuffix) == 0 then
      return true
    end
    at = at + 6
  end
  return false
end
local fencedMs, why = storeFence(ARGV[10], ttl, lossSeen)
local fenced = fencedMs > 0
local out = {}
local at = 11
for i = 1, n do
  local id = ARGV[at]
  local lock, stop, run = lockPrefix .. id .. lockSuffix, stopPrefix .. id .. stopSuffix, runPrefix .. id .. runSuffix
  local owned = 0
  local holder = redis.call('GET', lock)
  if fenced and not holder then
    redis.call('SET', lock, ARGV[at + 1], 'PX', ttl)
    owned = 2
  elseif holder == ARGV[at + 1] then
    redis.call('PEXPIRE', lock, ttl)
    if redis.call('HGET', run, 'run_id') == ARGV[at + 2] then
      if ARGV[at + 3] ~= '' then
        redis.call('HSET', run, 'state', ARGV[at + 3], 'last_action_at', ARGV[at + 4])
        if ARGV[at + 5] ~= '' then
          redis.call('HSET', run, 'in_flight', ARGV[at + 5])
        end
      end
      redis.call('PEXPIRE', run, ttl)
    end
    owned = 1
  end
  out[2 * i - 1] = owned
  out[2 * i] = redis.call('GET', stop) or ''
  at = at + 6
end
if m > 0 then
  local t = redis.call('TIME')
  local expiresAt = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ttl)
  local extended = {}
  for j = 1, m do
    local key, member, lease = ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2])
    if lease == 0 or out[2 * lease - 1] > 0 then
      redis.call('ZADD', key, expiresAt, member)
      if not extended[key] then
        redis.call('PEXPIRE', key, ttl)
        extended[key] = true
      end
    end
    at = at + 3
  end
end
out[2 * n + 1] = fencedMs
out[2 * n + 2] = why
return out
