-- Reads a workflow's follow log (docs/spec.md §14): its state and the entries after a position.
-- KEYS[1]  the log's backlog, a stream   longrun:{wf:<id>}:follow:events
-- KEYS[2]  the log's state, a hash       longrun:{wf:<id>}:follow
-- ARGV[1]  the position: entries after this id; '' for those after the latest run or
--          checkpoint, whichever is later
-- ARGV[2]  the most entries returned (the backlog's bound)
-- Returns  {} when there is no log, else
--          {last, state, run_id, run, checkpoint_id, checkpoint, oldest id kept, entries}
--          ('' for what is absent; entries as XRANGE gives them: {{'<id>-0', {'k', kind, 'd', data}}, …})
local meta = redis.call('HMGET', KEYS[2], 'last', 'state', 'run_id', 'run', 'checkpoint_id', 'checkpoint')
if not meta[1] then return {} end
local from = ARGV[1]
if from == '' then
  local run, checkpoint = tonumber(meta[3]) or 0, tonumber(meta[5]) or 0
  from = (run > 0 or checkpoint > 0) and string.format('%.0f', math.max(run, checkpoint)) or meta[1]
end
local entries = redis.call('XRANGE', KEYS[1], '(' .. from .. '-0', '+', 'COUNT', ARGV[2])
local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
return {meta[1], meta[2] or '', meta[3] or '', meta[4] or '', meta[5] or '', meta[6] or '', oldest and oldest[1] or '', entries}
