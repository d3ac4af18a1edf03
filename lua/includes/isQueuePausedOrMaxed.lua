--[[
  True when no worker should be woken: the queue is paused, or its global concurrency
  (meta "concurrency", docs/protocol.md §1.2) is already reached by the active list. A
  concurrency that is not a number (no runtime writes one) sets no limit.
]]
local function isQueuePausedOrMaxed(metaKey, activeKey)
  local meta = redis.call("HMGET", metaKey, "paused", "concurrency")
  if meta[1] then
    return true
  end
  local concurrency = tonumber(meta[2])
  if concurrency then
    return redis.call("LLEN", activeKey) >= concurrency
  end
  return false
end
