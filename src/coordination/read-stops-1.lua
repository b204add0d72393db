-- Reads many stop keys in one round trip, on a Redis Cluster: MGET refuses keys of
-- different slots, and the stop poll reads the stop keys of every run of this process.
-- One call per primary (see renew-leases-1.lua on keys passed in ARGV).
--
-- KEYS[1]  any key of the batch (the first stop key): where the call is sent
-- ARGV     the stop keys
-- Returns  an array with, per key in order, its value, or "" when it is not set.
local out = {}
for i = 1, #ARGV do
  out[i] = redis.call('GET', ARGV[i]) or ''
end
return out
