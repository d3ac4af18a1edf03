--[[
  Wake a blocked worker: marker member "0" at score 0 means "a job is ready".
]]
local function addBaseMarkerIfNeeded(markerKey, isPausedOrMaxed)
  if not isPausedOrMaxed then
    redis.call("ZADD", markerKey, "0", "0")
  end
end
