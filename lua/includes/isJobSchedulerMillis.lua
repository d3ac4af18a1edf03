--[[
  True when value is a time a scheduler may hold (docs/protocol.md §4.1): a number, whole, and
  within what a JavaScript Date holds (|ms| <= 8.64e15, exact in a double). The scheduler scripts
  check every time they were given with it before their first write.
]]
local function isJobSchedulerMillis(value)
  return type(value) == "number" and value == math.floor(value) and value >= -8640000000000000
    and value <= 8640000000000000
end
