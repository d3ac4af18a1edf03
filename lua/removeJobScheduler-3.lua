--[[
  Remove a job scheduler: its pending iteration if that is still delayed (with a "removed"
  event), then its entry in the repeat set and its hash. A pending iteration already in wait
  or prioritized is left to run; it produces nothing more, as its scheduler is gone.

  Input:
    KEYS[1]  repeat
    KEYS[2]  delayed
    KEYS[3]  events
    ARGV[1]  scheduler id
    ARGV[2]  key prefix "<prefix>:{<queue>}:"

  Output:
    0  removed
    1  no such scheduler

  Events: "removed" (jobId, prev = "delayed") for a deleted pending iteration (uncapped).
]]
-- @include "toIntString"
-- @include "removeJobKeys"
local schedulerId = ARGV[1]
local millis = redis.call("ZSCORE", KEYS[1], schedulerId)
if millis then
  local jobId = "repeat:" .. schedulerId .. ":" .. toIntString(tonumber(millis))
  if redis.call("ZREM", KEYS[2], jobId) == 1 then
    removeJobKeys(ARGV[2] .. jobId)
    redis.call("XADD", KEYS[3], "*", "event", "removed", "jobId", jobId, "prev", "delayed")
  end
end
if redis.call("ZREM", KEYS[1], schedulerId) == 1 then
  redis.call("DEL", KEYS[1] .. ":" .. schedulerId)
  return 0
end
return 1
