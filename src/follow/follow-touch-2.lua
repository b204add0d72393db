-- Keeps a followed workflow's log (docs/spec.md §14) another TTL: a replica with followers of the
-- workflow sends it every announcement, so the log lives while anyone follows, runs or not.
-- KEYS[1]  the log's backlog   longrun:{wf:<id>}:follow:events
-- KEYS[2]  the log's state     longrun:{wf:<id>}:follow
-- ARGV[1]  TTL in milliseconds
-- Returns  1 when the log exists, else 0
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return redis.call('PEXPIRE', KEYS[2], ARGV[1])
