--[[
  The events stream cap: meta "opts.maxLenEvents", written as 10000 when missing
  (every BullMQ script does the same, so the field appears as soon as any script ran).

  eventsCapArg gives the cap as the argument for XADD/XTRIM MAXLEN ~, for a caller that may
  have read the field already (known; false or nil: read it here, and write the default if
  missing). A cap stored as plain digits goes on as that text: a Lua number would be formatted
  with printf on every call.
]]
local function getOrSetMaxEvents(metaKey)
  local maxEvents = redis.call("HGET", metaKey, "opts.maxLenEvents")
  if not maxEvents then
    maxEvents = 10000
    redis.call("HSET", metaKey, "opts.maxLenEvents", maxEvents)
  end
  return tonumber(maxEvents)
end

local function eventsCapArg(metaKey, known)
  if known and string.match(known, "^%d+$") then
    return known
  end
  return tonumber(known) or getOrSetMaxEvents(metaKey)
end
