--[[
  The heart of moveToActive (also the fetch-next step of moveToFinished and moveToDelayed):
  promote due delayed jobs, then take the next job unless the queue is paused, maxed or rate
  limited: wait first (RPOPLPUSH, skipping legacy "0:" markers), then the lowest prioritized
  (ZPOPMIN; "pc" is DELeted when prioritized is empty).
  q: wait, active, prioritized, pc, delayed, marker, meta, events, limiter.
  w: token, lockDuration, name, limiterMax, limiterDuration (the worker's limiter, may be nil).
  meta: meta's "max", "duration", "paused", "concurrency" when the caller has read them already
  (HMGET order; nil: read here, in one HMGET).
  Returns {job hash, jobId, 0, 0} for a job; {0, 0, ttl, 0} when rate limited; {0, 0, 0, 0}
  when paused or maxed; {0, 0, 0, nextDueMs} when only delayed jobs remain; nil when the
  queue is empty (no delayed job either): the caller decides about "drained".
]]
-- @include "isQueuePausedOrMaxed"
-- @include "promoteDelayedJobs"
-- @include "getRateLimitTTL"
-- @include "prepareJobForProcessing"
local function fetchNextJob(q, prefix, timestamp, w, meta)
  meta = meta or redis.call("HMGET", q.meta, "max", "duration", "paused", "concurrency")
  local pausedOrMaxed = isPausedOrMaxedBy(meta[3], meta[4], q.active)
  promoteDelayedJobs(q, prefix, timestamp, pausedOrMaxed)

  local maxJobs = tonumber(meta[1] or w.limiterMax)
  local ttl = getRateLimitTTL(maxJobs, q.limiter)
  if ttl > 0 then
    return {0, 0, ttl, 0}
  end
  if pausedOrMaxed then
    return {0, 0, 0, 0}
  end
  local limiterDuration = w.limiterDuration or meta[2]

  local jobId = redis.call("RPOPLPUSH", q.wait, q.active)
  while jobId and string.sub(jobId, 1, 2) == "0:" do
    redis.call("LREM", q.active, 1, jobId)
    jobId = redis.call("RPOPLPUSH", q.wait, q.active)
  end
  if not jobId then
    local popped = redis.call("ZPOPMIN", q.prioritized)
    if popped[1] then
      jobId = popped[1]
      redis.call("LPUSH", q.active, jobId)
    else
      redis.call("DEL", q.pc)
    end
  end
  if jobId then
    return prepareJobForProcessing(q, prefix, jobId, timestamp, w, maxJobs, limiterDuration)
  end

  local first = redis.call("ZRANGE", q.delayed, "0", "0", "WITHSCORES")
  if first[2] then
    return {0, 0, 0, tonumber(first[2]) / 0x1000}
  end
  return nil
end
