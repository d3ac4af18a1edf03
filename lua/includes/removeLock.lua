--[[
  Release a job's lock if this worker holds it, and forget it in the stalled set.
  Token "0" means the caller took no lock. Returns 0, -2 (no lock) or -6 (another owner).
]]
local function removeLock(jobKey, stalledKey, token, jobId)
  if token == "0" then
    return 0
  end
  local lockKey = jobKey .. ":lock"
  local current = redis.call("GET", lockKey)
  if current == token then
    redis.call("DEL", lockKey)
    redis.call("SREM", stalledKey, jobId)
    return 0
  end
  if current then
    return -6
  end
  return -2
end
