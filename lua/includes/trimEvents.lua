--[[
  Approximate trim of the events stream to the queue's cap, for a script whose own XADDs are
  uncapped (the stalled check). known: meta "opts.maxLenEvents" when the caller has read it
  already (eventsCapArg). A stored cap that is not an integer >= 0 trims nothing: the stalled
  check still returns the jobs it must.
]]
-- @include "getOrSetMaxEvents"
local function trimEvents(metaKey, eventsKey, known)
  local cap = eventsCapArg(metaKey, known)
  if cap then
    redis.call("XTRIM", eventsKey, "MAXLEN", "~", cap)
  end
end
