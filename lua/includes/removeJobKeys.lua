--[[
  Delete a job's hash and every key that hangs off it (a cancel request included, §1.3).
]]
local function removeJobKeys(jobKey)
  return redis.call("DEL", jobKey, jobKey .. ":logs", jobKey .. ":dependencies",
    jobKey .. ":processed", jobKey .. ":failed", jobKey .. ":unsuccessful", jobKey .. ":lock", jobKey .. ":cancel")
end
