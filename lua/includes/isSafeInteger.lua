--[[
  True for a whole number a script can pass on to Redis as an integer: within +-(2^53 - 1), the
  range where a Lua double is exact (docs/protocol.md §2.3).
]]
local function isSafeInteger(n)
  return type(n) == "number" and n == math.floor(n) and n >= -9007199254740991 and n <= 9007199254740991
end
