--[[
  Delete one job for clean, drain and obliterate: release (or remove, same queue) its parent,
  give up its deduplication id and delete its keys. The caller takes the id out of its state
  and writes no per-job event (BullMQ writes none for these).
]]
-- @include "releaseParentOfRemovedJob"
-- @include "removeDeduplicationKeyOnRemoval"
-- @include "removeJobKeys"
local function removeJobHard(prefix, jobId)
  local jobKey = prefix .. jobId
  releaseParentOfRemovedJob(jobKey, true, prefix)
  removeDeduplicationKeyOnRemoval(prefix, jobId, jobKey)
  removeJobKeys(jobKey)
end
