--[[
  The events stream cap: meta "opts.maxLenEvents", written as 10000 when missing
  (every BullMQ script does the same, so the field appears as soon as any script ran).
]]
local function getOrSetMaxEvents(metaKey)
  local maxEvents = redis.call("HGET", metaKey, "opts.maxLenEvents")
  if not maxEvents then
    maxEvents = 10000
    redis.call("HSET", metaKey, "opts.maxLenEvents", maxEvents)
  end
  return tonumber(maxEvents)
end
