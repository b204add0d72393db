-- The store fence (docs/spec.md §5 "a store that lost its locks"), a prelude the lock and
-- lease scripts are loaded with: it defines one function, storeFence.
--
-- A Redis that restarts empty, a failover to a replica that had not received the last
-- writes, or a flush loses locks whose holders are still running. Granting one of those
-- workflows again would start a second call beside a live one. So every lock or lease
-- script first asks whether this primary is the one that last answered: the marker hash
-- names the server (INFO `run_id`) that wrote it.
--
-- - It names this server: the fence it wrote, if any, is still what holds.
-- - It names another server (a restart, or a failover: the last writes may be gone): the
--   store lost its data. New locks are refused for one lease TTL from now.
-- - It is missing: the store is new or lost its data, and the server's own facts tell
--   which it may be. A replica promoted since the server started (a failover), or a
--   server that flushed or evicted keys since it started (the marker with them), lost
--   its data: one lease TTL from now. Otherwise every write this server holds is its own
--   since it started, and a lock granted since would have marked it: only a lease
--   granted before its start can be missing, and that one ends by start + TTL. So a
--   server up longer than a TTL is new and serves at once, and a younger one is fenced
--   until it is a TTL old: "new", unless a holder renews a lock it lacks (lossSeen):
--   then it certainly lost data ("lost", the same end).
--
-- Every lease granted before a loss was last confirmed before it, so by the fence's end
-- its holder has stopped or re-asserted it (renew-leases-1.lua re-creates a lock that is
-- missing while the fence is up; nothing else can have taken it).
--
-- storeFence(marker, ttl, lossSeen)
--   marker    the marker hash of this primary (src/redis/keys.ts `storeMarker`), fields run_id,
--             fenced_until (ms since the epoch, by the server's clock) and fence (`new`
--             or `lost`: what the fence is for; absent, as an older gateway writes it: lost)
--   ttl       the lease TTL in milliseconds
--   lossSeen  nil, or a function answering whether a live holder is renewing a lock this
--             store lacks (called only when that decides something)
--   Returns how many milliseconds new locks stay refused (0: none), and why: `new` or
--   `lost` ('' when none).
local function infoNumber(text, field)
  return tonumber(string.match(text, field .. ':(%-?%d+)'))
end

-- Whether the data of this server since it started may be less than what it wrote: a
-- promotion (the replica's copy was behind), a flush, an eviction. A counter CONFIG
-- RESETSTAT cleared cannot say: a reset counts as a flush. A field that cannot be read
-- counts as the loss it would show.
local function mayHaveLostData()
  if infoNumber(redis.call('INFO', 'replication'), 'second_repl_offset') ~= -1 then
    return true
  end
  if (infoNumber(redis.call('INFO', 'stats'), 'evicted_keys') or 1) > 0 then
    return true
  end
  local commands = redis.call('INFO', 'commandstats')
  for _, name in ipairs({ 'flushall', 'flushdb', 'swapdb', 'config|resetstat' }) do
    if string.find(commands, 'cmdstat_' .. name .. ':', 1, true) then
      return true
    end
  end
  return false
end

local function storeFence(marker, ttl, lossSeen)
  ttl = tonumber(ttl)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local server = redis.call('INFO', 'server')
  local runId = string.match(server, 'run_id:(%w+)')
  local writer = redis.call('HGET', marker, 'run_id')
  if writer == runId then
    local fencedUntil = tonumber(redis.call('HGET', marker, 'fenced_until') or '0') or 0
    if fencedUntil <= now then
      return 0, ''
    end
    local why = redis.call('HGET', marker, 'fence') or 'lost'
    if why == 'new' and lossSeen and lossSeen() then
      why = 'lost'
      redis.call('HSET', marker, 'fence', why)
    end
    return fencedUntil - now, why
  end
  local fencedUntil, why = now + ttl, 'lost'
  if not writer and not mayHaveLostData() then
    -- Up for uptime (whole seconds, so at least that long): nothing it lacks outlives start + TTL.
    local uptimeMs = (infoNumber(server, 'uptime_in_seconds') or 0) * 1000
    local lost = lossSeen and lossSeen()
    if uptimeMs < ttl then
      fencedUntil = now + ttl - uptimeMs
      why = lost and 'lost' or 'new'
    elseif not lost then
      fencedUntil, why = 0, 'new'
    end
  end
  redis.call('HSET', marker, 'run_id', runId, 'fenced_until', fencedUntil, 'fence', why)
  if fencedUntil <= now then
    return 0, ''
  end
  return fencedUntil - now, why
end
