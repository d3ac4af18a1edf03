--[[
  Give a job a new priority. A job waiting for a worker is placed again at once: in wait when
  the new priority is 0 (LPUSH; RPUSH with lifo, the end workers take next), in prioritized
  otherwise (score priority * 2^32 + the pc counter; with lifo the counter part is 0, ahead of
  every job of the same priority). A job in any other state (delayed, active, waiting-children,
  finished, a legacy paused list) only has its hash "priority" changed, which applies when it
  next enters wait (promotion, retry). A worker is woken unless the queue is paused or maxed,
  except after a lifo move into prioritized, which writes no marker (as BullMQ 6.7).

  Input:
    KEYS[1] wait   KEYS[2] meta   KEYS[3] prioritized   KEYS[4] active   KEYS[5] pc
    KEYS[6] marker   KEYS[7] job
    ARGV[1] the new priority (0 .. 2^21-1, checked by the client)   ARGV[2] job id
    ARGV[3] "1" for lifo

  Output:
    0   changed
    -1  the job does not exist

  Events: none.
]]
-- @include "toIntString"
-- @include "getPriorityScore"
-- @include "isQueuePausedOrMaxed"
-- @include "addBaseMarkerIfNeeded"
local jobId, lifo = ARGV[2], ARGV[3] == "1"
if redis.call("EXISTS", KEYS[7]) == 0 then
  return -1
end
local priority = tonumber(ARGV[1])
local waiting = redis.call("ZREM", KEYS[3], jobId) > 0 or redis.call("LREM", KEYS[1], -1, jobId) > 0
if waiting then
  local pausedOrMaxed = isQueuePausedOrMaxed(KEYS[2], KEYS[4])
  if priority == 0 then
    redis.call(lifo and "RPUSH" or "LPUSH", KEYS[1], jobId)
    addBaseMarkerIfNeeded(KEYS[6], pausedOrMaxed)
  elseif lifo then
    redis.call("ZADD", KEYS[3], toIntString(priority * 0x100000000), jobId)
  else
    redis.call("ZADD", KEYS[3], toIntString(getPriorityScore(priority, KEYS[5])), jobId)
    addBaseMarkerIfNeeded(KEYS[6], pausedOrMaxed)
  end
end
redis.call("HSET", KEYS[7], "priority", ARGV[1])
return 0
