--[[
  Take a job id out of whichever state holds it and return that state's raw name, as the
  "removed" event's prev reports it: completed, waiting-children, delayed, failed, prioritized,
  wait, paused (legacy list), active, or unknown.
]]
local function removeJobFromAnyState(prefix, jobId)
  for _, set in ipairs({"completed", "waiting-children", "delayed", "failed", "prioritized"}) do
    if redis.call("ZREM", prefix .. set, jobId) == 1 then
      return set
    end
  end
  for _, list in ipairs({"wait", "paused", "active"}) do
    if redis.call("LREM", prefix .. list, 1, jobId) == 1 then
      return list
    end
  end
  return "unknown"
end
