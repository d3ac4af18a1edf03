--[[
  The first step of every way out of "active": release this worker's lock, take the job off the
  active list and apply the fields the worker sends (failedReason, stacktrace ...).
  Returns 0, or the error code to return: -2/-6 (lock missing / held by another worker),
  -3 (the job is not in active). Both refusals are found before anything is written: the
  LREM that finds no id removes nothing (docs/protocol.md §6.1). The lock, checked once, is
  then deleted directly (removeLock would read it a second time).
]]
-- @include "checkLock"
-- @include "updateJobFieldsFromJson"
local function releaseActiveJob(jobKey, activeKey, stalledKey, token, jobId, fieldsJson)
  local code = checkLock(jobKey, token)
  if code < 0 then
    return code
  end
  if redis.call("LREM", activeKey, "-1", jobId) < 1 then
    return -3
  end
  if token ~= "0" then
    redis.call("DEL", jobKey .. ":lock")
    redis.call("SREM", stalledKey, jobId)
  end
  updateJobFieldsFromJson(jobKey, fieldsJson)
  return 0
end
