-- Records how a run ended, first report wins (the gateway may call back twice; the
-- watchdog may report a run it found gone).
-- KEYS[1]  run hash    <prefix>:run:<run_id>
-- ARGV[1]  reason (a segment-end reason, or "lost")
-- ARGV[2]  in_flight (JSON list)
-- ARGV[3]  who reported it: callback, watchdog or execute
-- ARGV[4]  now (ms since the epoch)
-- Returns  1 when recorded now, 0 when an end was already recorded.
if redis.call('HSETNX', KEYS[1], 'end_reason', ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'end_in_flight', ARGV[2], 'end_via', ARGV[3], 'ended_at', ARGV[4])
redis.call('EXPIRE', KEYS[1], 604800)
return 1
