--[[
  Tell blocked workers when the earliest delayed job is due: marker member "1" with the due
  time in ms as its score (score/4096, so it may be fractional, as BullMQ writes it).
]]
local function addDelayMarkerIfNeeded(markerKey, delayedKey)
  local first = redis.call("ZRANGE", delayedKey, 0, 0, "WITHSCORES")
  if first[2] then
    redis.call("ZADD", markerKey, tonumber(first[2]) / 0x1000, "1")
  end
end
