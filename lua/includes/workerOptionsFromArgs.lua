--[[
  The worker's options table from flat ARGV, starting at index i:
  token, lockDuration, name, limiterMax, limiterDuration (the last three may be "").
]]
local function workerOptionsFromArgs(args, i)
  local function orNil(v)
    if v == nil or v == "" then
      return nil
    end
    return v
  end
  return {token = args[i], lockDuration = args[i + 1], name = orNil(args[i + 2]),
          limiterMax = tonumber(orNil(args[i + 3])), limiterDuration = tonumber(orNil(args[i + 4]))}
end
