--[[
  Approximate trim of the events stream to the queue's cap, for a script whose own XADDs are
  uncapped (the stalled check). known: meta "opts.maxLenEvents" when the caller has read it
  already (eventsCapArg).
]]
-- @include "getOrSetMaxEvents"
local function trimEvents(metaKey, eventsKey, known)
  redis.call("XTRIM", eventsKey, "MAXLEN", "~", eventsCapArg(metaKey, known))
end
