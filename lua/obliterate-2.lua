--[[
  Destroy a paused queue, a bounded batch per call: the jobs of every state (active ones only
  with force; their locks go too), the job schedulers and their hashes (a paused one's parked
  iteration too, docs/protocol.md §4.6), then the queue's own keys. Call again while it
  returns 1.

  Input:
    KEYS[1] meta   KEYS[2] prefix, the queue's key prefix "<base>:" (a key, so Cluster routes it)
    ARGV[1] the most jobs to delete in this call   ARGV[2] "1" to delete active jobs too

  Output:
    0   the queue is gone
    1   more to delete: call again
    -1  the queue is not paused
    -2  it has active jobs and force was not given

  Events: none (the events stream itself is deleted).
]]
-- @include "removeJobHard"
-- @include "toIntString"
local base = KEYS[2]
local budget = tonumber(ARGV[1])
if redis.call("HEXISTS", KEYS[1], "paused") ~= 1 then
  return -1
end

local function removeIds(ids)
  for _, jobId in ipairs(ids) do
    removeJobHard(base, jobId)
  end
  budget = budget - #ids
end

local active = redis.call("LRANGE", base .. "active", 0, budget - 1)
if #active > 0 and ARGV[2] ~= "1" then
  return -2
end
removeIds(active)
redis.call("LTRIM", base .. "active", #active, -1)
if budget <= 0 then
  return 1
end

for _, name in ipairs({"delayed", "repeat", "completed", "wait", "paused", "prioritized",
                       "failed", "waiting-children"}) do
  local key = base .. name
  local ids
  if name == "wait" or name == "paused" then
    ids = redis.call("LRANGE", key, 0, budget - 1)
    removeIds(ids)
    redis.call("LTRIM", key, #ids, -1)
  else
    ids = redis.call("ZRANGE", key, 0, budget - 1)
    if name == "repeat" then
      for _, schedulerId in ipairs(ids) do
        redis.call("DEL", base .. "repeat:" .. schedulerId)
        local parked = redis.call("ZSCORE", base .. "schedulers:paused", schedulerId)
        if parked then  -- in no list: only its scheduler knows it
          removeJobHard(base, "repeat:" .. schedulerId .. ":" .. toIntString(tonumber(parked)))
          redis.call("ZREM", base .. "schedulers:paused", schedulerId)
        end
      end
      budget = budget - #ids
    else
      removeIds(ids)
    end
    for i = 1, #ids, 5000 do
      redis.call("ZREM", key, unpack(ids, i, math.min(i + 4999, #ids)))
    end
  end
  if budget <= 0 then
    return 1
  end
end

redis.call("DEL", base .. "events", base .. "delay", base .. "stalled-check", base .. "stalled",
  base .. "id", base .. "pc", base .. "marker", base .. "meta", base .. "limiter",
  base .. "metrics:completed", base .. "metrics:completed:data", base .. "metrics:failed",
  base .. "metrics:failed:data", base .. "schedulers:paused")
return 0
