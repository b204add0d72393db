-- Writes a run's record (docs/spec.md §5) with the lease's TTL, in one command.
-- KEYS[1]  run record  workhorse:duoworkflow:run:<workflow_id>
-- ARGV[1]  TTL in milliseconds
-- ARGV[2…] field, value, field, value, … (every field of the record, so none stays stale)
-- Returns  1
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
