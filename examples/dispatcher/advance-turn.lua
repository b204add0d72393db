-- Decides what a run's recorded end means for its turn, once: the turn resumes (a new
-- segment is due) or ends. Counting happens the first time only; "resume" is answered
-- again while the turn still waits on this run, so a caller whose enqueue failed can
-- retry it (the queue's job id makes the enqueue itself idempotent).
-- KEYS[1]  turn hash   <prefix>:turn:<workflow_id>
-- KEYS[2]  run hash    <prefix>:run:<run_id>
-- ARGV[1]  run id
-- ARGV[2]  now (ms since the epoch)
-- Returns  { action, reason, in_flight, first } where first is "1" when this call decided
--          it (the end was acted on now), and action is
--          "resume"  dispatch the next segment,
--          "final"   the turn just ended with reason,
--          "done"    nothing more to do for this run,
--          "pending" the end is not known yet, or the run is not (yet) the turn's.
if redis.call('HGET', KEYS[2], 'ours') ~= '1' then
  return { 'pending', '', '[]', '0' }
end
local reason = redis.call('HGET', KEYS[2], 'end_reason')
if not reason then
  return { 'pending', '', '[]', '0' }
end
local in_flight = redis.call('HGET', KEYS[2], 'end_in_flight') or '[]'
local status = redis.call('HGET', KEYS[1], 'status')
local open = status == 'dispatching' or status == 'running'
local final = reason == 'finished' or reason == 'stop_requested'
local first = redis.call('HSETNX', KEYS[2], 'acted', '1') == 1
if final then
  if first then
    -- Every run that ended the turn, counted: more than one would be a turn finished twice.
    redis.call('HINCRBY', KEYS[1], 'final_runs', 1)
  end
  if first and open then
    local ended = 'finished'
    if reason == 'stop_requested' then
      ended = 'stopped'
    end
    redis.call('HSET', KEYS[1], 'status', ended, 'ended_reason', reason, 'ended_at', ARGV[2])
    redis.call('HINCRBY', KEYS[1], 'finals', 1)
    return { 'final', reason, in_flight, '1' }
  end
  return { 'done', reason, in_flight, '0' }
end
if first then
  redis.call('HINCRBY', KEYS[1], 'boundaries', 1)
  if redis.call('HGET', KEYS[2], 'end_via') == 'watchdog' then
    redis.call('HINCRBY', KEYS[1], 'recovered', 1)
  end
end
local decided = '0'
if first then
  decided = '1'
end
if open and redis.call('HGET', KEYS[1], 'run_id') == ARGV[1] then
  return { 'resume', reason, in_flight, decided }
end
return { 'done', reason, in_flight, decided }
