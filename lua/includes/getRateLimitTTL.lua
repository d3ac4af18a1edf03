--[[
  Milliseconds until the queue's rate limiter lets the next job through, or 0 when it does now.
  maxJobs is nil when no limit applies (neither the worker's nor meta "max").
]]
local function getRateLimitTTL(maxJobs, limiterKey)
  if not maxJobs then
    return 0
  end
  local taken = tonumber(redis.call("GET", limiterKey) or 0)
  if taken < maxJobs then
    return 0
  end
  local ttl = redis.call("PTTL", limiterKey)
  if ttl == 0 then
    redis.call("DEL", limiterKey)
  end
  if ttl < 0 then
    return 0
  end
  return ttl
end
