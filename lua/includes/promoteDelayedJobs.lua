--[[
  Move every delayed job that is due by `timestamp` (at most 1000 per call) to wait, or to
  prioritized when it has a priority. Each one writes the uncapped "waiting" prev=delayed event
  and gets its hash "delay" reset to 0; one base marker wakes a worker afterwards.
  q is a table of this queue's keys: delayed, wait, prioritized, pc, marker, events.
]]
-- @include "toIntString"
-- @include "getPriorityScore"
-- @include "addBaseMarkerIfNeeded"
local function promoteDelayedJobs(q, prefix, timestamp, isPausedOrMaxed)
  -- The earliest delayed job first: most calls find none due (or no delayed job at all), and
  -- this look costs a third of formatting the score bound and running the range query.
  local upTo = (tonumber(timestamp) + 1) * 0x1000 - 1
  local first = redis.call("ZRANGE", q.delayed, "0", "0", "WITHSCORES")
  if not first[2] or tonumber(first[2]) > upTo then
    return 0
  end
  local due = redis.call("ZRANGEBYSCORE", q.delayed, "0", toIntString(upTo), "LIMIT", "0", "1000")
  redis.call("ZREM", q.delayed, unpack(due))
  for _, jobId in ipairs(due) do
    local jobKey = prefix .. jobId
    local priority = tonumber(redis.call("HGET", jobKey, "priority")) or 0
    if priority > 0 then
      redis.call("ZADD", q.prioritized, toIntString(getPriorityScore(priority, q.pc)), jobId)
    else
      redis.call("LPUSH", q.wait, jobId)
    end
    redis.call("XADD", q.events, "*", "event", "waiting", "jobId", jobId, "prev", "delayed")
    redis.call("HSET", jobKey, "delay", 0)
  end
  addBaseMarkerIfNeeded(q.marker, isPausedOrMaxed)
  return #due
end
