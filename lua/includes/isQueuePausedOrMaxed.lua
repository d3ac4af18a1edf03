--[[
  True when no worker should be woken: the queue is paused, or its global concurrency
  (meta "concurrency", docs/protocol.md §1.2) is already reached by the active list. A
  concurrency that is not a number (no runtime writes one) sets no limit.
  isPausedOrMaxedBy decides from meta's "paused" and "concurrency" values when the caller has
  read them already (fetchNextJob reads them with the limiter's fields in one HMGET).
]]
local function isPausedOrMaxedBy(paused, concurrency, activeKey)
  if paused then
    return true
  end
  local limit = tonumber(concurrency)
  if limit then
    return redis.call("LLEN", activeKey) >= limit
  end
  return false
end

local function isQueuePausedOrMaxed(metaKey, activeKey)
  local meta = redis.call("HMGET", metaKey, "paused", "concurrency")
  return isPausedOrMaxedBy(meta[1], meta[2], activeKey)
end
