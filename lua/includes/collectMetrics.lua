--[[
  Count one finished job in the queue's per-minute metrics (docs/protocol.md §1.2, §3.4), the
  data BullMQ's getMetrics reads: hash metricsKey (metrics:<finished>) holds the running total
  "count" and, as of the last point written, "prevTS" (ms) and "prevCount" (the total then);
  list dataKey (metrics:<finished>:data) holds one point per minute, newest first, at most
  maxPoints long.

  The first job ever counted only stamps prevTS (prevCount 0). A job finishing in a later minute
  than prevTS closes the minutes in between: it pushes the jobs counted since prevTS (the point
  of prevTS's minute), then a 0 for every idle minute after it, never more than maxPoints points
  in all; trims the list and moves prevTS/prevCount to now. The job being counted belongs to the
  new minute. The minute is the caller's timestamp's (the worker's clock), never the server's.
]]
local function collectMetrics(metricsKey, dataKey, maxPoints, timestamp)
  local batch = 5000  -- points per LPUSH: Lua's unpack cannot spread many more onto its stack
  local before = redis.call("HINCRBY", metricsKey, "count", 1) - 1
  local stamps = redis.call("HMGET", metricsKey, "prevTS", "prevCount")
  local prevTS = tonumber(stamps[1])
  if not prevTS then
    redis.call("HSET", metricsKey, "prevTS", timestamp, "prevCount", 0)
    return
  end
  local minutes = math.min(math.floor(timestamp / 60000) - math.floor(prevTS / 60000), maxPoints)
  if minutes <= 0 then
    return
  end
  redis.call("LPUSH", dataKey, before - (tonumber(stamps[2]) or 0))
  local idle = minutes - 1
  if idle > 0 then
    local zeros = {}
    for i = 1, math.min(idle, batch) do
      zeros[i] = 0
    end
    while idle > 0 do
      local n = math.min(idle, batch)
      redis.call("LPUSH", dataKey, unpack(zeros, 1, n))
      idle = idle - n
    end
  end
  redis.call("LTRIM", dataKey, 0, maxPoints - 1)
  redis.call("HSET", metricsKey, "prevCount", before, "prevTS", timestamp)
end
