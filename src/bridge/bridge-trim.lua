-- What a replica's reader has read of its inbox is removed (docs/spec.md §12), and the inbox
-- itself once nothing is left in it, so an idle replica leaves no key behind. Atomic with
-- bridge-send.lua: an entry appended meanwhile keeps the stream.
-- KEYS[1]  the inbox   longrun:{bridge:<replica>}:inbox
-- ARGV[1]  the lowest id kept (the one after the last read)
-- Returns  the entries left
redis.call('XTRIM', KEYS[1], 'MINID', ARGV[1])
local left = redis.call('XLEN', KEYS[1])
if left == 0 then redis.call('DEL', KEYS[1]) end
return left
