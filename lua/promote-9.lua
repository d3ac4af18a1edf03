--[[
  Promote one delayed job: it leaves delayed now and goes to wait (LPUSH) or, with a priority,
  to prioritized; its hash "delay" is reset to 0 and a worker is woken unless the queue is
  paused or maxed.

  Input:
    KEYS[1] delayed   KEYS[2] wait   KEYS[3] paused (legacy, unused)   KEYS[4] meta
    KEYS[5] prioritized   KEYS[6] active   KEYS[7] pc   KEYS[8] events   KEYS[9] marker
    ARGV[1] key prefix "<base>:"   ARGV[2] job id

  Output:
    0   promoted
    -3  the job is not delayed

  Events: waiting (jobId, prev=delayed), uncapped as BullMQ writes it.
]]
-- @include "toIntString"
-- @include "getPriorityScore"
-- @include "isQueuePausedOrMaxed"
-- @include "addBaseMarkerIfNeeded"
local jobId = ARGV[2]
if redis.call("ZREM", KEYS[1], jobId) == 0 then
  return -3
end
local jobKey = ARGV[1] .. jobId
local priority = tonumber(redis.call("HGET", jobKey, "priority")) or 0
local pausedOrMaxed = isQueuePausedOrMaxed(KEYS[4], KEYS[6])
if priority > 0 then
  redis.call("ZADD", KEYS[5], toIntString(getPriorityScore(priority, KEYS[7])), jobId)
else
  redis.call("LPUSH", KEYS[2], jobId)
end
addBaseMarkerIfNeeded(KEYS[9], pausedOrMaxed)
redis.call("XADD", KEYS[8], "*", "event", "waiting", "jobId", jobId, "prev", "delayed")
redis.call("HSET", jobKey, "delay", 0)
return 0
