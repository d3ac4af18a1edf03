--[[
  True when jobId is the current pending iteration of a live job scheduler: its hash names a
  scheduler (rjk) that is still in the repeat set with this very iteration's millis.
  Such a job must not be removed, drained or cleaned (it is how the schedule keeps firing).
]]
-- @include "toIntString"
local function isJobSchedulerJob(jobId, jobKey, repeatKey)
  local schedulerId = redis.call("HGET", jobKey, "rjk")
  if not schedulerId then
    return false
  end
  local millis = redis.call("ZSCORE", repeatKey, schedulerId)
  if not millis then
    return false
  end
  return jobId == "repeat:" .. schedulerId .. ":" .. toIntString(tonumber(millis))
end
