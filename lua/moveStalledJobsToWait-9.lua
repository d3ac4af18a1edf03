--[[
  moveStalledJobsToWait: the stalled check, at most once per stalled interval per queue (the
  "stalled-check" key is the mutex). Every id that was active at the previous check, is still
  active and whose lock is gone has stalled: stc + 1, back to wait at the consuming end (RPUSH)
  with "waiting" prev=active then "stalled" (docs/protocol.md §3.5). A job stalled more than max stalled count
  times gets "defa" (the next worker to take it fails it) unless it belongs to a live job
  scheduler, whose iterations are always requeued (docs/protocol.md §4.4). Then the current active
  list seeds the stalled set for the next check.

  Input:
    KEYS[1] stalled    KEYS[2] wait      KEYS[3] active     KEYS[4] stalled-check
    KEYS[5] meta       KEYS[6] paused (legacy, unused)      KEYS[7] marker
    KEYS[8] events     KEYS[9] repeat
    ARGV[1] max stalled count    ARGV[2] key prefix    ARGV[3] timestamp (ms)
    ARGV[4] check interval (ms): the mutex TTL

  Output: the ids moved back to wait ({} also when another worker checked recently).
  Events: uncapped "waiting" (jobId, prev=active) and "stalled" (jobId) per stalled job; the
    stream is trimmed first.
]]
-- @include "trimEvents"
-- @include "isQueuePausedOrMaxed"
-- @include "addBaseMarkerIfNeeded"
local stalledKey, waitKey, activeKey = KEYS[1], KEYS[2], KEYS[3]
local eventsKey, repeatKey = KEYS[8], KEYS[9]
local maxStalled = tonumber(ARGV[1])
local prefix = ARGV[2]

if redis.call("EXISTS", KEYS[4]) == 1 then
  return {}
end
redis.call("SET", KEYS[4], ARGV[3], "PX", ARGV[4])
trimEvents(KEYS[5], eventsKey)

local moved = {}
local candidates = redis.call("SMEMBERS", stalledKey)
if #candidates > 0 then
  redis.call("DEL", stalledKey)
  for _, jobId in ipairs(candidates) do
    if string.sub(jobId, 1, 2) == "0:" then
      redis.call("LREM", activeKey, 1, jobId)
    else
      local jobKey = prefix .. jobId
      if redis.call("EXISTS", jobKey .. ":lock") == 0 and redis.call("LREM", activeKey, 1, jobId) > 0 then
        local stalledCount = redis.call("HINCRBY", jobKey, "stc", 1)
        local schedulerId = redis.call("HGET", jobKey, "rjk")
        local live = false
        if schedulerId then
          live = redis.call("EXISTS", repeatKey .. ":" .. schedulerId) == 1
            or redis.call("ZSCORE", repeatKey, schedulerId) ~= false
        end
        if stalledCount > maxStalled and not live then
          redis.call("HSET", jobKey, "defa", "job stalled more than allowable limit")
        end
        redis.call("RPUSH", waitKey, jobId)
        addBaseMarkerIfNeeded(KEYS[7], isQueuePausedOrMaxed(KEYS[5], activeKey))
        redis.call("XADD", eventsKey, "*", "event", "waiting", "jobId", jobId, "prev", "active")
        redis.call("XADD", eventsKey, "*", "event", "stalled", "jobId", jobId)
        table.insert(moved, jobId)
      end
    end
  end
end

local active = redis.call("LRANGE", activeKey, 0, -1)
for i = 1, #active, 5000 do
  redis.call("SADD", stalledKey, unpack(active, i, math.min(i + 4999, #active)))
end
return moved
