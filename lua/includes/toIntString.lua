--[[
  A Lua number as a decimal integer string. tostring() keeps only 14 significant digits
  (a delayed score of 7.3e15 would lose its low digits), so ids and scores go through here.
]]
local function toIntString(n)
  return string.format("%.0f", n)
end
