--[[
  Score of a prioritized job: priority * 2^32 + a counter, so equal priorities stay FIFO.
]]
local function getPriorityScore(priority, pcKey)
  local counter = redis.call("INCR", pcKey)
  return tonumber(priority) * 0x100000000 + counter % 0x100000000
end
