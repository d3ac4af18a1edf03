--[[
  The events stream cap: meta "opts.maxLenEvents", written as 10000 when missing
  (every BullMQ script does the same, so the field appears as soon as any script ran).

  eventsCapArg gives the cap as the argument for XADD/XTRIM MAXLEN ~, for a caller that may
  have read the field already (known; false or nil: read it here, and write the default if
  missing), or nil when the stored cap is not an integer >= 0 (the caller refuses before it
  writes). A cap stored as plain digits goes on as that text: a Lua number would be formatted
  with printf on every call.
]]
-- @include "isSafeInteger"
local function getOrSetMaxEvents(metaKey)
  local maxEvents = redis.call("HGET", metaKey, "opts.maxLenEvents")
  if not maxEvents then
    maxEvents = 10000
    redis.call("HSET", metaKey, "opts.maxLenEvents", maxEvents)
  end
  return tonumber(maxEvents)
end

local function eventsCapArg(metaKey, known)
  if known and #known <= 15 and string.match(known, "^%d+$") then
    return known
  end
  local cap = known and tonumber(known) or getOrSetMaxEvents(metaKey)
  if isSafeInteger(cap) and cap >= 0 then
    return cap
  end
  return nil
end
