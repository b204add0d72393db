-- Opens a turn of a workflow unless one is open already.
-- KEYS[1]  turn hash   <prefix>:turn:<workflow_id>
-- ARGV[1]  the turn's request (JSON: goal, workflowMetadata)
-- ARGV[2]  now (ms since the epoch)
-- Returns  1 when opened, 0 when a turn of the workflow is still open.
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'dispatching' or status == 'running' then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'status', 'dispatching', 'run_id', '', 'request', ARGV[1], 'started_at', ARGV[2],
  'segments', 0, 'resumes', 0, 'boundaries', 0, 'recovered', 0, 'finals', 0, 'final_runs', 0)
return 1
