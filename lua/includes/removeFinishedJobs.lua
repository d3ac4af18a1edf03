--[[
  Auto-removal after a job finished (removeOnComplete / removeOnFail as {count, age, limit}):
  delete jobs older than maxAge seconds (at most maxLimit per call), then keep only the newest
  maxCount. No "removed" events (docs/protocol.md §3.4).
]]
-- @include "toIntString"
-- @include "removeJobKeys"
local function removeFinishedJobs(targetSet, prefix, timestamp, maxAge, maxCount, maxLimit)
  if maxAge then
    local oldest = toIntString(tonumber(timestamp) - maxAge * 1000)
    local old = redis.call("ZREVRANGEBYSCORE", targetSet, oldest, "-inf", "LIMIT", 0, maxLimit)
    for _, jobId in ipairs(old) do
      removeJobKeys(prefix .. jobId)
      redis.call("ZREM", targetSet, jobId)
    end
  end
  if maxCount and maxCount > 0 then
    local extra = redis.call("ZREVRANGE", targetSet, maxCount, -1)
    for _, jobId in ipairs(extra) do
      removeJobKeys(prefix .. jobId)
    end
    if #extra > 0 then
      redis.call("ZREMRANGEBYRANK", targetSet, 0, -(maxCount + 1))
    end
  end
end
