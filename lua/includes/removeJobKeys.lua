--[[
  Delete a job's hash and every key that hangs off it.
]]
local function removeJobKeys(jobKey)
  return redis.call("DEL", jobKey, jobKey .. ":logs", jobKey .. ":dependencies",
    jobKey .. ":processed", jobKey .. ":failed", jobKey .. ":unsuccessful", jobKey .. ":lock")
end
