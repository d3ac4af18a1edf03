--[[
  Put a job just taken out of <prev> back in line (docs/protocol.md §3.7, retry and promote):
    prev "completed"/"failed": HDEL finishedOn, processedOn and the outcome (returnvalue or
      failedReason) plus the fields in `resets` (attempt counters); the job goes to
      prioritized when it has a priority, else to wait (RPUSH with opts lifo, else LPUSH); a
      flow child becomes its parent's pending dependency again;
    prev "delayed": hash delay = 0; prioritized or wait (LPUSH), as promote does.
  Then a base marker unless paused or maxed, and a capped "waiting" (jobId, prev).
  q is a table of this queue's keys: wait, prioritized, pc, marker, events.
]]
-- @include "toIntString"
-- @include "getPriorityScore"
-- @include "addBaseMarkerIfNeeded"
-- @include "restoreParentDependency"
local function requeueJob(q, jobKey, jobId, prev, resets, pausedOrMaxed, maxEvents)
  local attrs = redis.call("HMGET", jobKey, "priority", "opts")
  local priority = tonumber(attrs[1]) or 0
  local lifo = false
  if prev ~= "delayed" and attrs[2] then
    local ok, opts = pcall(cjson.decode, attrs[2])
    lifo = ok and type(opts) == "table" and opts["lifo"] == true
  end
  if prev == "delayed" then
    redis.call("HSET", jobKey, "delay", 0)
  else
    local outcome = "returnvalue"
    if prev == "failed" then
      outcome = "failedReason"
    end
    redis.call("HDEL", jobKey, "finishedOn", "processedOn", outcome, unpack(resets))
  end
  if priority > 0 then
    redis.call("ZADD", q.prioritized, toIntString(getPriorityScore(priority, q.pc)), jobId)
  elseif lifo then
    redis.call("RPUSH", q.wait, jobId)
  else
    redis.call("LPUSH", q.wait, jobId)
  end
  if prev ~= "delayed" then
    restoreParentDependency(jobKey, prev)
  end
  addBaseMarkerIfNeeded(q.marker, pausedOrMaxed)
  redis.call("XADD", q.events, "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", jobId,
    "prev", prev)
end
