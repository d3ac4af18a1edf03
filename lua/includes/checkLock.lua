--[[
  Whether the caller may release a job's lock, without writing anything: 0 when it holds the
  lock (or took none: token "0"), -2 when there is no lock, -6 when another worker holds it.
]]
local function checkLock(jobKey, token)
  if token == "0" then
    return 0
  end
  local current = redis.call("GET", jobKey .. ":lock")
  if current == token then
    return 0
  end
  if current then
    return -6
  end
  return -2
end
