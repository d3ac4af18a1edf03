--[[
  The events stream cap: meta "opts.maxLenEvents", written as 10000 when missing
  (every BullMQ script does the same, so the field appears as soon as any script ran).
  getOrSetMaxEvents always gives a cap XADD MAXLEN ~ takes: a stored one that is not an integer
  >= 0 gives 2^53 - 1, which trims nothing (a script must not fail half-way on it).

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
    redis.call("HSET", metaKey, "opts.maxLenEvents", 10000)
    return 10000
  end
  local cap = tonumber(maxEvents)
  if isSafeInteger(cap) and cap >= 0 then
    return cap
  end
  -- Not a count (written by someone else): capped writes trim nothing, as trimEvents does, where
  -- XADD would fail with it after the script's first writes.
  return "9007199254740991"
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
