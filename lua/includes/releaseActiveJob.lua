--[[
  The first step of every way out of "active": release this worker's lock, take the job off the
  active list and apply the fields the worker sends (failedReason, stacktrace ...).
  Returns 0, or the error code to return: -2/-6 (lock missing / held by another worker),
  -3 (the job is not in active), -12 (a cancel request <job>:cancel is pending and this exit is
  not the cancellation: only a final failure as cancelled may end the job, docs/protocol.md
  §3.8). Every refusal is found before anything is written: the LREM that finds no id removes
  nothing (§6.1). The lock, checked once, is then deleted directly (removeLock would read it a
  second time); so is the cancel request of a cancellation.
]]
-- @include "checkLock"
-- @include "updateJobFieldsFromJson"
local function releaseActiveJob(jobKey, activeKey, stalledKey, token, jobId, fieldsJson, cancelling)
  local code = checkLock(jobKey, token)
  if code < 0 then
    return code
  end
  local cancelKey = jobKey .. ":cancel"
  local cancelRequested = redis.call("EXISTS", cancelKey) == 1
  if cancelRequested and not cancelling then
    return -12
  end
  if redis.call("LREM", activeKey, "-1", jobId) < 1 then
    return -3
  end
  if cancelRequested then
    redis.call("DEL", cancelKey)
  end
  if token ~= "0" then
    redis.call("DEL", jobKey .. ":lock")
    redis.call("SREM", stalledKey, jobId)
  end
  updateJobFieldsFromJson(jobKey, fieldsJson)
  return 0
end
