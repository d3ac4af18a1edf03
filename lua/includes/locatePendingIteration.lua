--[[
  Where a scheduler's pending iteration sits, if it is somewhere an upsert may replace it:
  "delayed", "prioritized", "wait" or a legacy "paused" list. nil when it is running, finished
  or gone (those are never touched). Reads only: the caller decides before it writes anything.
  q is the queue's key table (delayed, prioritized, wait, paused).
]]
local function locatePendingIteration(q, jobId)
  if redis.call("ZSCORE", q.delayed, jobId) then
    return "delayed"
  end
  if redis.call("ZSCORE", q.prioritized, jobId) then
    return "prioritized"
  end
  if redis.call("LPOS", q.wait, jobId) then
    return "wait"
  end
  if redis.call("LPOS", q.paused, jobId) then
    return "paused"
  end
  return nil
end
