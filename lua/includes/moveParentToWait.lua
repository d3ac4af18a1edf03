--[[
  A parent's last pending child is done: put the parent where its own options say, in the
  parent's queue (parentQueueKey = "<prefix>:{<queue>}"): delayed when it has a delay (uncapped
  "delayed" event), else wait (RPUSH) or prioritized, with the uncapped "waiting"
  prev=waiting-children event. The caller has already ZREMed it from waiting-children.
]]
-- @include "toIntString"
-- @include "getDelayedScore"
-- @include "getPriorityScore"
-- @include "isQueuePausedOrMaxed"
-- @include "addBaseMarkerIfNeeded"
-- @include "addDelayMarkerIfNeeded"
local function moveParentToWait(parentQueueKey, parentKey, parentId, timestamp)
  local attrs = redis.call("HMGET", parentKey, "priority", "delay")
  local priority = tonumber(attrs[1]) or 0
  local delay = tonumber(attrs[2]) or 0
  local events = parentQueueKey .. ":events"
  local marker = parentQueueKey .. ":marker"
  if delay > 0 then
    local delayedKey = parentQueueKey .. ":delayed"
    local score, due = getDelayedScore(delayedKey, timestamp, delay)
    redis.call("ZADD", delayedKey, toIntString(score), parentId)
    redis.call("XADD", events, "*", "event", "delayed", "jobId", parentId, "delay", toIntString(due))
    addDelayMarkerIfNeeded(marker, delayedKey)
    return
  end
  local pausedOrMaxed = isQueuePausedOrMaxed(parentQueueKey .. ":meta", parentQueueKey .. ":active")
  if priority > 0 then
    local score = getPriorityScore(priority, parentQueueKey .. ":pc")
    redis.call("ZADD", parentQueueKey .. ":prioritized", toIntString(score), parentId)
  else
    redis.call("RPUSH", parentQueueKey .. ":wait", parentId)
  end
  addBaseMarkerIfNeeded(marker, pausedOrMaxed)
  redis.call("XADD", events, "*", "event", "waiting", "jobId", parentId, "prev", "waiting-children")
end
