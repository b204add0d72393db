-- Appends one bridge message to a replica's inbox stream (docs/spec.md §12), bounded, and
-- keeps the inbox from outliving a reader that died: its TTL is renewed with every message.
-- KEYS[1]  the inbox   longrun:{bridge:<replica>}:inbox
-- ARGV[1]  TTL in milliseconds
-- ARGV[2]  the most entries the inbox keeps (approximate trim; a reader never lags that far)
-- ARGV[3…] field, value, … of the entry
-- Returns  the entry's id
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return id
