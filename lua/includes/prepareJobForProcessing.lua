--[[
  A job id has just been pushed onto active: count it against the rate limiter, take its lock
  (token "0" means no lock), stamp processedOn (and pb, the worker's name, when given), count
  the attempt started (ats) and write the uncapped "active" prev=waiting event. The "0" marker
  is re-added so another blocked worker looks for the next job.
  w is the worker's options table: token, lockDuration, name, limiterMax, limiterDuration.
  Returns {flat job hash, jobId, 0, 0}, the shape moveToActive returns to the worker.
]]
-- @include "addBaseMarkerIfNeeded"
local function prepareJobForProcessing(q, prefix, jobId, timestamp, w, maxJobs, limiterDuration)
  local jobKey = prefix .. jobId
  if maxJobs and redis.call("HEXISTS", jobKey, "defa") == 0 then
    if redis.call("INCR", q.limiter) == 1 then
      redis.call("PEXPIRE", q.limiter, math.floor(math.abs(tonumber(limiterDuration) or 0)))
    end
  end
  if w.token ~= "0" then
    redis.call("SET", jobKey .. ":lock", w.token, "PX", w.lockDuration)
  end
  redis.call("XADD", q.events, "*", "event", "active", "jobId", jobId, "prev", "waiting")
  if w.name and w.name ~= "" then
    redis.call("HSET", jobKey, "processedOn", timestamp, "pb", w.name)
  else
    redis.call("HSET", jobKey, "processedOn", timestamp)
  end
  redis.call("HINCRBY", jobKey, "ats", "1")
  addBaseMarkerIfNeeded(q.marker, false)
  return {redis.call("HGETALL", jobKey), jobId, 0, 0}
end
