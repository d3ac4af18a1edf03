--[[
  True when a worker holds the job's lock (it is being processed) or, with checkChildren, when
  any pending child down the tree is locked: such a job cannot be removed.
]]
-- @include "splitJobKey"
local function isJobLocked(prefix, jobId, checkChildren)
  local jobKey = prefix .. jobId
  if redis.call("EXISTS", jobKey .. ":lock") == 1 then
    return true
  end
  if checkChildren then
    for _, childKey in ipairs(redis.call("SMEMBERS", jobKey .. ":dependencies")) do
      local childPrefix, childId = splitJobKey(childKey)
      if isJobLocked(childPrefix, childId, true) then
        return true
      end
    end
  end
  return false
end
