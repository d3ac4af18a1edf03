--[[
  True for a whole number a script can pass on to Redis as an integer: within +-(2^53 - 1), the
  range where a Lua double is exact (docs/protocol.md §2.3).
]]
local function isSafeInteger(n)
  -- n % 1 is 0 for a whole number only (NaN for NaN and the infinities): no math.floor call
  return type(n) == "number" and n % 1 == 0 and n >= -9007199254740991 and n <= 9007199254740991
end
