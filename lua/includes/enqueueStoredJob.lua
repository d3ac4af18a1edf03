--[[
  Place a job whose hash is already stored:
    delay > 0     -> ZADD delayed (due*4096+seq), capped "delayed" event, delay marker;
    priority > 0  -> ZADD prioritized, capped "waiting" event, base marker;
    otherwise     -> LPUSH wait (RPUSH when lifo), capped "waiting" event, base marker.
  q is a table of this queue's keys: wait, delayed, prioritized, pc, marker, meta, active, events.
  Returns the state the job went to: "delayed", "prioritized" or "wait".
]]
-- @include "toIntString"
-- @include "getDelayedScore"
-- @include "getPriorityScore"
-- @include "isQueuePausedOrMaxed"
-- @include "addBaseMarkerIfNeeded"
-- @include "addDelayMarkerIfNeeded"
local function enqueueStoredJob(q, jobId, timestamp, delay, priority, lifo, maxEvents)
  delay = tonumber(delay) or 0
  priority = tonumber(priority) or 0
  if delay > 0 then
    local score, due = getDelayedScore(q.delayed, timestamp, delay)
    redis.call("ZADD", q.delayed, toIntString(score), jobId)
    redis.call("XADD", q.events, "MAXLEN", "~", maxEvents, "*", "event", "delayed",
      "jobId", jobId, "delay", toIntString(due))
    addDelayMarkerIfNeeded(q.marker, q.delayed)
    return "delayed"
  end
  local pausedOrMaxed = isQueuePausedOrMaxed(q.meta, q.active)
  local state = "wait"
  if priority > 0 then
    redis.call("ZADD", q.prioritized, toIntString(getPriorityScore(priority, q.pc)), jobId)
    state = "prioritized"
  elseif lifo then
    redis.call("RPUSH", q.wait, jobId)
  else
    redis.call("LPUSH", q.wait, jobId)
  end
  redis.call("XADD", q.events, "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", jobId)
  addBaseMarkerIfNeeded(q.marker, pausedOrMaxed)
  return state
end
