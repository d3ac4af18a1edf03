--[[
  BullMQ 6: a queue is paused while meta has the field "paused"; jobs stay in wait.
]]
local function isQueuePaused(metaKey)
  return redis.call("HEXISTS", metaKey, "paused") == 1
end
