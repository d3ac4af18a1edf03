--[[
  A user's remove: release the job's parent, optionally remove its children (pending,
  processed, failed and unsuccessful ones, in any queue, recursively), take the job out of
  its state, give up its deduplication id, delete its keys and write "removed" with prev.
  No event is written for a job that did not exist.
]]
-- @include "splitJobKey"
-- @include "releaseParentOfRemovedJob"
-- @include "removeJobFromAnyState"
-- @include "removeDeduplicationKeyOnRemoval"
-- @include "removeJobKeys"
-- @include "getOrSetMaxEvents"
local function removeJobWithChildren(prefix, jobId, removeChildren)
  local jobKey = prefix .. jobId
  releaseParentOfRemovedJob(jobKey, false, prefix)
  if removeChildren then
    local children = {}
    local processed = redis.call("HKEYS", jobKey .. ":processed")
    local failed = redis.call("HKEYS", jobKey .. ":failed")
    local unsuccessful = redis.call("ZRANGE", jobKey .. ":unsuccessful", 0, -1)
    local pending = redis.call("SMEMBERS", jobKey .. ":dependencies")
    for _, group in ipairs({processed, failed, unsuccessful, pending}) do
      for _, childKey in ipairs(group) do
        table.insert(children, childKey)
      end
    end
    for _, childKey in ipairs(children) do
      local childPrefix, childId = splitJobKey(childKey)
      removeJobWithChildren(childPrefix, childId, true)
    end
  end
  local prev = removeJobFromAnyState(prefix, jobId)
  removeDeduplicationKeyOnRemoval(prefix, jobId, jobKey)
  if removeJobKeys(jobKey) > 0 then
    local maxEvents = getOrSetMaxEvents(prefix .. "meta")
    redis.call("XADD", prefix .. "events", "MAXLEN", "~", maxEvents, "*", "event", "removed",
      "jobId", jobId, "prev", prev)
  end
end
