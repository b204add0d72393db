-- Appends a batch of a watched run's events to its workflow's log (docs/spec.md §14), numbers
-- them, keeps the latest run and checkpoint beside the backlog, renews the log's TTL and
-- publishes the batch to the replicas following the workflow — one call per batch.
-- KEYS[1]  the log's backlog, a stream        longrun:{wf:<id>}:events
-- KEYS[2]  the log's state, a hash            longrun:{wf:<id>}:watch
--          last, state, run_id, run, checkpoint_id, checkpoint
-- ARGV[1]  TTL in milliseconds (of both keys)
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
if not last then
  local time = redis.call('TIME')
  last = tonumber(time[1]) * 1000000 + math.floor(tonumber(time[2]) / 1000) * 1000 - 1
  local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
  if newest then
    local kept = tonumber(string.match(newest[1], '^(%d+)'))
    if kept and kept > last then last = kept end
  end
end
local lines = {}
for i = 5, #ARGV, 2 do
  last = last + 1
  local id = string.format('%.0f', last)
  local kind, data = ARGV[i], ARGV[i + 1]
  redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[2], id .. '-0', 'k', kind, 'd', data)
  if kind == 'run' or kind == 'checkpoint' then redis.call('HSET', KEYS[2], kind .. '_id', id, kind, data) end
  lines[#lines + 1] = id .. ' ' .. kind .. ' ' .. data
end
local id = string.format('%.0f', last)
redis.call('HSET', KEYS[2], 'last', id, 'state', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[3], table.concat(lines, '\n'))
return id
