--[[
  True when no worker should be woken: the queue is paused, or its global concurrency
  (meta "concurrency") is already reached by the active list.
]]
local function isQueuePausedOrMaxed(metaKey, activeKey)
  local meta = redis.call("HMGET", metaKey, "paused", "concurrency")
  if meta[1] then
    return true
  end
  if meta[2] then
    return redis.call("LLEN", activeKey) >= tonumber(meta[2])
  end
  return false
end
