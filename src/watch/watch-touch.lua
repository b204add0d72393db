-- Keeps a watched workflow's log (docs/spec.md §14) another TTL: a replica with watchers of the
-- workflow sends it every announcement, so the log lives while anyone watches, runs or not.
-- KEYS[1]  the log's backlog   longrun:{wf:<id>}:events
-- KEYS[2]  the log's state     longrun:{wf:<id>}:watch
-- ARGV[1]  TTL in milliseconds
-- Returns  1 when the log exists, else 0
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return redis.call('PEXPIRE', KEYS[2], ARGV[1])
