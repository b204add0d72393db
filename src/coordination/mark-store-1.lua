-- Marks a new store (`longrun store mark`, store-mark.ts): the marker of this primary
-- (store-fence.lua) names the server that answers, with no fence up, so the gateways'
-- first locks are granted at once. It refuses, changing nothing, where the store's own
-- marker or replication says it may have lost data: only the fence can tell that loss
-- from a new store.
-- KEYS[1]  the store marker of this primary (src/redis/keys.ts `storeMarker`)
-- ARGV[1]  `mark`, or `check`: answer what marking would do, changing nothing
-- Returns  {outcome, N}: `marked` (the marker was missing, or a new store's fence was up:
--          N ms of it were left; it names this server now, with no fence), `already` (it named this server, no fence up), `lost`
--          (a fence for lost data is up, N ms left; or the marker names another server:
--          a restart or a failover, N = 0), `promoted` (no marker, and this server is a
--          replica promoted since it started: a failover).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local runId = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
local state = redis.call('HMGET', KEYS[1], 'run_id', 'fenced_until', 'fence')
local left = 0
if state[1] == runId then
  left = math.max(0, (tonumber(state[2] or '0') or 0) - now)
  if left == 0 then
    return { 'already', 0 }
  end
  if (state[3] or 'lost') ~= 'new' then
    return { 'lost', left }
  end
elseif state[1] then
  return { 'lost', 0 }
elseif tonumber(string.match(redis.call('INFO', 'replication'), 'second_repl_offset:(%-?%d+)')) ~= -1 then
  return { 'promoted', 0 }
end
if ARGV[1] == 'mark' then
  redis.call('HSET', KEYS[1], 'run_id', runId, 'fenced_until', 0, 'fence', 'new')
end
return { 'marked', left }
