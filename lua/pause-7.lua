--[[
  Pause or resume a queue, BullMQ 6 style: pausing sets meta "paused" and deletes the marker
  (jobs stay in wait; workers check the flag). Resuming clears the flag, migrates a legacy
  "paused" list left by BullMQ 5 (RENAME when wait is absent, otherwise up to 7000 ids per call
  appended to wait), then re-adds the "0" marker when wait or prioritized has jobs, else the
  delayed marker.

  Input:
    KEYS[1] <source> list (pause: wait; resume: paused)
    KEYS[2] <target> list (pause: paused; resume: wait)
    KEYS[3] meta   KEYS[4] prioritized   KEYS[5] events   KEYS[6] delayed   KEYS[7] marker
    ARGV[1] "paused" or "resumed"   ARGV[2] "1" to write the event, "0" to skip it

  Output:
    the number of legacy paused ids still to migrate (call resume again, without the event)

  Events: paused or resumed (no fields).
]]
-- @include "addDelayMarkerIfNeeded"
local markerKey = KEYS[7]
local remaining = 0
if ARGV[1] == "paused" then
  redis.call("HSET", KEYS[3], "paused", 1)
  redis.call("DEL", markerKey)
else
  redis.call("HDEL", KEYS[3], "paused")
  local legacy, wait = KEYS[1], KEYS[2]
  if redis.call("EXISTS", legacy) == 1 then
    if redis.call("EXISTS", wait) == 0 then
      redis.call("RENAME", legacy, wait)
    else
      local ids = redis.call("LRANGE", legacy, 0, 6999)
      redis.call("RPUSH", wait, unpack(ids))
      redis.call("LTRIM", legacy, #ids, -1)
      remaining = redis.call("LLEN", legacy)
    end
  end
  if redis.call("LLEN", wait) + redis.call("ZCARD", KEYS[4]) > 0 then
    redis.call("ZADD", markerKey, 0, "0")
  else
    addDelayMarkerIfNeeded(markerKey, KEYS[6])
  end
end
if ARGV[2] ~= "0" then
  redis.call("XADD", KEYS[5], "*", "event", ARGV[1])
end
return remaining
