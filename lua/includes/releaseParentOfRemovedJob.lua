--[[
  A job is being removed: take it out of its parent's pending dependencies. When it was the
  parent's last pending child and the parent is waiting for children:
    soft (a user's remove)      the parent goes to wait (RPUSH) with "waiting"
                                prev=waiting-children in the parent queue's stream;
    hard (clean/drain/obliterate) a parent in the same queue is removed with it (its own parent
                                released the same way); a parent in another queue goes to wait
                                silently.
]]
-- @include "splitJobKey"
-- @include "removeJobKeys"
-- @include "isQueuePausedOrMaxed"
-- @include "addBaseMarkerIfNeeded"
local function releaseParentOfRemovedJob(jobKey, hard, baseKey)
  local parentKey = redis.call("HGET", jobKey, "parentKey")
  if not parentKey or parentKey == "" or redis.call("EXISTS", parentKey) == 0 then
    return
  end
  local dependenciesKey = parentKey .. ":dependencies"
  if redis.call("SREM", dependenciesKey, jobKey) == 0 or redis.call("SCARD", dependenciesKey) > 0 then
    return
  end
  local parentPrefix, parentId = splitJobKey(parentKey)
  if redis.call("ZREM", parentPrefix .. "waiting-children", parentId) == 0 then
    return
  end
  if hard and parentPrefix == baseKey then
    releaseParentOfRemovedJob(parentKey, hard, baseKey)
    local deduplicationId = redis.call("HGET", parentKey, "deid")
    if deduplicationId then
      redis.call("DEL", parentPrefix .. "de:" .. deduplicationId)
    end
    removeJobKeys(parentKey)
    return
  end
  local pausedOrMaxed = isQueuePausedOrMaxed(parentPrefix .. "meta", parentPrefix .. "active")
  redis.call("RPUSH", parentPrefix .. "wait", parentId)
  addBaseMarkerIfNeeded(parentPrefix .. "marker", pausedOrMaxed)
  if not hard then
    redis.call("XADD", parentPrefix .. "events", "*", "event", "waiting", "jobId", parentId,
      "prev", "waiting-children")
  end
end
