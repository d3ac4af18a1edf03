--[[
  Approximate trim of the events stream to the queue's cap, for scripts whose own XADDs are
  uncapped (moveToFinished, the stalled check). known: meta "opts.maxLenEvents" when the
  caller has read it already (false or nil: read it here, and write the default if missing).
  A cap stored as plain digits goes to XTRIM as that text: a Lua number would be formatted
  with printf on every call.
]]
-- @include "getOrSetMaxEvents"
local function trimEvents(metaKey, eventsKey, known)
  local maxEvents = tonumber(known) or getOrSetMaxEvents(metaKey)
  local cap = maxEvents
  if known and string.match(known, "^%d+$") then
    cap = known
  end
  redis.call("XTRIM", eventsKey, "MAXLEN", "~", cap)
  return maxEvents
end
