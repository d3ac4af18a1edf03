--[[
  Flow bookkeeping when a child finishes for good (docs/protocol.md §1.3 dependencies/processed/failed/
  unsuccessful; §3.6: this runs before the child's own "completed" is written).
  completed: the child leaves the parent's dependencies, its return value goes to
    <parent>:processed, and the parent moves to wait when no dependency is left.
  failed: by the child's parent options: fpof fails the parent (defa) and releases it at once;
    cpof records the failure and releases it; idof/rdof drop the dependency (idof records it)
    and release it when nothing else is pending. Otherwise the parent keeps waiting.
]]
-- @include "moveParentToWait"
local function updateParentOnChildFinished(childKey, parentKey, parentJson, target, value, timestamp)
  if (not parentKey or parentKey == "") and not parentJson then
    return
  end
  local parent = {}
  if parentJson then
    parent = cjson.decode(parentJson)
  end
  local parentId = parent["id"]
  local parentQueueKey = parent["queueKey"]
  if not parentId then
    parentId = string.match(parentKey, "([^:]+)$")
    parentQueueKey = string.sub(parentKey, 1, #parentKey - #parentId - 1)
  end
  parentKey = parentQueueKey .. ":" .. parentId
  local deps = parentKey .. ":dependencies"
  local waitingChildren = parentQueueKey .. ":waiting-children"

  local function release(onlyWhenNoneLeft)
    if redis.call("EXISTS", parentKey) == 0 then
      return
    end
    if onlyWhenNoneLeft and redis.call("SCARD", deps) > 0 then
      return
    end
    if redis.call("ZSCORE", waitingChildren, parentId) then
      redis.call("ZREM", waitingChildren, parentId)
      moveParentToWait(parentQueueKey, parentKey, parentId, timestamp)
    end
  end

  if target == "completed" then
    if redis.call("SREM", deps, childKey) == 1 then
      redis.call("HSET", parentKey .. ":processed", childKey, value)
      release(true)
    end
    return
  end
  if parent["fpof"] then
    if redis.call("SREM", deps, childKey) == 1 then
      redis.call("ZADD", parentKey .. ":unsuccessful", timestamp, childKey)
      if redis.call("EXISTS", parentKey) == 1 then
        local reason = "child " .. childKey .. " failed"
        local delayedKey = parentQueueKey .. ":delayed"
        local from = nil
        if redis.call("ZSCORE", waitingChildren, parentId) then
          from = waitingChildren
        elseif redis.call("ZSCORE", delayedKey, parentId) then
          from = delayedKey
          redis.call("HSET", parentKey, "delay", 0)
        end
        if from then
          redis.call("ZREM", from, parentId)
          redis.call("HSET", parentKey, "defa", reason)
          moveParentToWait(parentQueueKey, parentKey, parentId, timestamp)
        elseif not redis.call("ZSCORE", parentQueueKey .. ":failed", parentId) then
          redis.call("HSET", parentKey, "defa", reason)
        end
      end
    end
  elseif parent["cpof"] then
    if redis.call("SREM", deps, childKey) == 1 then
      redis.call("HSET", parentKey .. ":failed", childKey, value)
      release(false)
    end
  elseif parent["idof"] or parent["rdof"] then
    if redis.call("SREM", deps, childKey) == 1 then
      if parent["idof"] then
        redis.call("HSET", parentKey .. ":failed", childKey, value)
      end
      release(true)
    end
  end
end
