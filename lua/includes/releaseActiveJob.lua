--[[
  The first step of every way out of "active": release this worker's lock, apply the fields
  the worker sends (failedReason, stacktrace ...), and take the job off the active list.
  Returns 0, or the error code to return: -2/-6 (lock missing / held by another worker),
  -3 (the job is not in active).
]]
-- @include "removeLock"
-- @include "updateJobFieldsFromJson"
local function releaseActiveJob(jobKey, activeKey, stalledKey, token, jobId, fieldsJson)
  local code = removeLock(jobKey, stalledKey, token, jobId)
  if code < 0 then
    return code
  end
  updateJobFieldsFromJson(jobKey, fieldsJson)
  if redis.call("LREM", activeKey, -1, jobId) < 1 then
    return -3
  end
  return 0
end
