--[[
  Remove a job scheduler: its pending iteration if that is still delayed (with a "removed"
  event), then its entry in the repeat set and its hash. A pending iteration already in wait
  or prioritized is left to run; it produces nothing more, as its scheduler is gone. A paused
  scheduler's parked iteration (in no list, never started) is deleted with it, and its record
  in <prefix>schedulers:paused (built from ARGV[2], under the queue's hash tag) too (§4.6).

  Input:
    KEYS[1]  repeat
    KEYS[2]  delayed
    KEYS[3]  events
    ARGV[1]  scheduler id
    ARGV[2]  key prefix "<prefix>:{<queue>}:"

  Output:
    0  removed
    1  no such scheduler

  Events: "removed" (jobId, prev = "delayed") for a deleted pending iteration (uncapped); none for
  a parked one.
]]
-- @include "toIntString"
-- @include "removeJobKeys"
local schedulerId = ARGV[1]
local parkedSet = ARGV[2] .. "schedulers:paused"
local parked = redis.call("ZSCORE", parkedSet, schedulerId)
if parked then
  local parkedId = "repeat:" .. schedulerId .. ":" .. toIntString(tonumber(parked))
  local parkedKey = ARGV[2] .. parkedId
  if not redis.call("HGET", parkedKey, "processedOn") and not redis.call("ZSCORE", KEYS[2], parkedId)
      and not redis.call("LPOS", ARGV[2] .. "wait", parkedId)
      and not redis.call("ZSCORE", ARGV[2] .. "prioritized", parkedId) then
    removeJobKeys(parkedKey)
  end
  redis.call("ZREM", parkedSet, schedulerId)
end
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
