--[[
  The bulk half of retry and promote (docs/protocol.md §3.7): take `ids` out of the sorted set
  `setKey` and put each job back in line as requeueJob does for one (prev names the state the
  set holds). A member whose hash is gone is only dropped from the set. Counters are kept.
  Returns {taken, requeued}: the ids taken, and how many of them were jobs put in line.
  q is a table of this queue's keys: wait, prioritized, pc, marker, events, meta, active.
]]
-- @include "getOrSetMaxEvents"
-- @include "isQueuePausedOrMaxed"
-- @include "requeueJob"
local function requeueSetMembers(setKey, ids, prefix, prev, q)
  if #ids == 0 then
    return {0, 0}
  end
  local pausedOrMaxed = isQueuePausedOrMaxed(q.meta, q.active)
  local maxEvents = getOrSetMaxEvents(q.meta)
  local requeued = 0
  for _, jobId in ipairs(ids) do
    redis.call("ZREM", setKey, jobId)
    local jobKey = prefix .. jobId
    if redis.call("EXISTS", jobKey) == 1 then
      requeueJob(q, jobKey, jobId, prev, {}, pausedOrMaxed, maxEvents)
      requeued = requeued + 1
    end
  end
  return {#ids, requeued}
end
