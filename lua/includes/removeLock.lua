--[[
  Release a job's lock if this worker holds it, and forget it in the stalled set.
  Token "0" means the caller took no lock. Returns 0, -2 (no lock) or -6 (another owner);
  nothing is written unless it returns 0.
]]
-- @include "checkLock"
local function removeLock(jobKey, stalledKey, token, jobId)
  local code = checkLock(jobKey, token)
  if code == 0 and token ~= "0" then
    redis.call("DEL", jobKey .. ":lock")
    redis.call("SREM", stalledKey, jobId)
  end
  return code
end
