-- The store fence (docs/spec.md §5 "a store that lost its locks"), a prelude the lock and
-- lease scripts are loaded with: it defines one function, fenceRemainingMs.
--
-- A Redis that restarts empty, or a failover to a replica that had not received the last
-- writes, loses locks whose holders are still running. Granting one of those workflows
-- again would start a second call beside a live one. So every lock or lease script first
-- asks whether this primary is the one that last answered: the marker hash names the
-- server (INFO `run_id`) that wrote it. Missing (the data is gone) or naming another
-- server (a restart or a failover: the last writes may be gone) means the store may have
-- lost locks: the marker is rewritten for this server and new locks are refused for one
-- lease TTL from now. Every lease granted before the loss was last confirmed before it,
-- so its holder has stopped or re-asserted it by then (renew-leases.lua re-creates a lock
-- that is missing while the fence is up; nothing else can have taken it).
--
-- fenceRemainingMs(marker, ttl)
--   marker  the marker hash of this primary (keys.ts `storeMarker`), fields run_id and
--           fenced_until (ms since the epoch, by the server's clock)
--   ttl     the lease TTL in milliseconds
--   Returns how many milliseconds new locks stay refused (0: none).
local function fenceRemainingMs(marker, ttl)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local server = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
  if redis.call('HGET', marker, 'run_id') ~= server then
    redis.call('HSET', marker, 'run_id', server, 'fenced_until', now + tonumber(ttl))
    return tonumber(ttl)
  end
  local fencedUntil = tonumber(redis.call('HGET', marker, 'fenced_until') or '0')
  if fencedUntil > now then
    return fencedUntil - now
  end
  return 0
end
