-- What a replica's reader has read of its inbox is removed (docs/spec.md §12), and the inbox
-- itself soon after nothing is left in it, so an idle replica leaves no key behind. Atomic with
-- bridge-send-1.lua: an entry appended meanwhile keeps the stream (the send renews its TTL).
-- KEYS[1]  the inbox   longrun:{bridge:<replica>}:inbox
-- ARGV[1]  the lowest id kept (the one after the last read)
-- ARGV[2]  how long an emptied inbox is kept, in milliseconds (at least 1)
-- Returns  the entries left
--
-- An emptied inbox expires rather than being deleted at once: a stream made anew numbers from
-- the clock, so one deleted and appended to within the millisecond of the last entry read
-- would give its first entry an id below that one (`<ms>-0` after `<ms>-5`), and the reader,
-- which reads after the last id it read, would never see it. The empty stream keeps its last
-- id; once it has expired, at least ARGV[2] ms later, the clock is past every id it held.
redis.call('XTRIM', KEYS[1], 'MINID', ARGV[1])
local left = redis.call('XLEN', KEYS[1])
if left == 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return left
