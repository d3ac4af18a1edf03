--[[
  Take a scheduler's pending iteration out of the queue so an upsert can replace it. `where`
  is what locatePendingIteration answered ("delayed", "prioritized", "wait" or "paused"), or
  "parked" for a paused scheduler's parked iteration (in no list, §4.6).
  Deletes the job's keys and the deduplication key it owns. Writes no event: BullMQ 6.7 writes
  none for a replaced iteration (the new one's "added" tells the story).
]]
-- @include "removeJobKeys"
local function removePendingIteration(q, prefix, jobId, where)
  if where == "delayed" or where == "prioritized" then
    redis.call("ZREM", q[where], jobId)
  elseif where ~= "parked" then
    redis.call("LREM", q[where], 1, jobId)
  end
  local jobKey = prefix .. jobId
  local dedupId = redis.call("HGET", jobKey, "deid")
  if dedupId then
    local dedupKey = prefix .. "de:" .. dedupId
    if redis.call("GET", dedupKey) == jobId then
      redis.call("DEL", dedupKey)
    end
  end
  removeJobKeys(jobKey)
end
