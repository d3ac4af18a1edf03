--[[
  Approximate trim of the events stream to the queue's cap, for scripts whose own XADDs are
  uncapped (moveToFinished, the stalled check).
]]
-- @include "getOrSetMaxEvents"
local function trimEvents(metaKey, eventsKey)
  local maxEvents = getOrSetMaxEvents(metaKey)
  redis.call("XTRIM", eventsKey, "MAXLEN", "~", maxEvents)
  return maxEvents
end
