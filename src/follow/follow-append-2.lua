-- Appends a batch of a followed run's events to its workflow's log (docs/spec.md §14), numbers
-- them, keeps the latest run and checkpoint beside the backlog, and publishes the batch to the
-- replicas following the workflow — one call per batch.
-- KEYS[1]  the log's backlog, a stream        longrun:{wf:<id>}:follow:events
-- KEYS[2]  the log's state, a hash            longrun:{wf:<id>}:follow
--          last, state, run_id, run, checkpoint_id, checkpoint
-- ARGV[1]  TTL in milliseconds (of both keys, set when the log is made)
-- ARGV[2]  the most entries the backlog keeps (an exact trim: one entry out for each one in)
-- ARGV[3]  the channel the batch is published on (the backlog's key name)
-- ARGV[4]  the log's state after the batch: open, resumable or final
-- ARGV[5…] kind, data, kind, data, … of the events, in order
-- Returns  the last event's id (decimal text)
--
-- Ids are consecutive integers. A new log is seeded from the server's clock (milliseconds
-- × 1 000), and never below what a backlog left behind holds, so ids keep increasing across
-- runs, replicas, and a log that expired. A stream id is `<id>-0`. Numbers are Lua doubles:
-- exact below 2^53 (9·10^15; the seed of today is 1.7·10^15), written with %.0f.
local last = tonumber(redis.call('HGET', KEYS[2], 'last'))
local created = not last
if created then
  local time = redis.call('TIME')
  last = tonumber(time[1]) * 1000000 + math.floor(tonumber(time[2]) / 1000) * 1000 - 1
  local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
  if newest then
    local kept = tonumber(string.match(newest[1], '^(%d+)'))
    if kept and kept > last then last = kept end
  end
end
local lines, state = {}, {}
for i = 5, #ARGV, 2 do
  last = last + 1
  local id = string.format('%.0f', last)
  local kind, data = ARGV[i], ARGV[i + 1]
  redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[2], id .. '-0', 'k', kind, 'd', data)
  if kind == 'run' or kind == 'checkpoint' then
    state[kind .. '_id'] = id
    state[kind] = data
  end
  lines[#lines + 1] = id .. ' ' .. kind .. ' ' .. data
end
local id = string.format('%.0f', last)
local fields = {'last', id, 'state', ARGV[4]}
for name, value in pairs(state) do
  fields[#fields + 1] = name
  fields[#fields + 1] = value
end
redis.call('HSET', KEYS[2], unpack(fields))
-- A log lives one TTL from its making and from each touch of a replica with followers of it
-- (follow-touch-2.lua, every announcement): not from each append, so that an append costs
-- no more than it must.
if created then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
redis.call('PUBLISH', ARGV[3], table.concat(lines, '\n'))
return id
