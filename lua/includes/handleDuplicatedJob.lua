--[[
  A custom job id that already exists: nothing is stored, "duplicated" is written and the
  existing id is returned. When the add names a parent and the existing job has none (or the
  same one, or a parent that is gone), the existing job is attached to the new parent: a
  completed job counts as a processed dependency, any other as a pending one. (A job that
  already belongs to another live parent was refused with -7 before anything was written.)
]]
local function handleDuplicatedJob(jobKey, jobId, parentKey, parentJson, parentDependenciesKey,
                                   completedKey, eventsKey, maxEvents)
  if parentKey ~= "" then
    if redis.call("ZSCORE", completedKey, jobId) then
      local returnvalue = redis.call("HGET", jobKey, "returnvalue") or "null"
      redis.call("HSET", parentKey .. ":processed", jobKey, returnvalue)
    elseif parentDependenciesKey ~= "" then
      redis.call("SADD", parentDependenciesKey, jobKey)
    end
    redis.call("HSET", jobKey, "parentKey", parentKey, "parent", parentJson)
  end
  redis.call("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "duplicated", "jobId", jobId)
  return jobId
end
