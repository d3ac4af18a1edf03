--[[
  A flow child is back in line (retried from completed or failed): it becomes a pending
  dependency of its parent again (docs/protocol.md §3.6), if the parent still exists and had
  recorded the child's outcome: a completed child leaves <parent>:processed; a failed one leaves
  <parent>:unsuccessful (fpof) or <parent>:failed (cpof, idof). The parent itself is not moved:
  one that already left waiting-children stays where it is.
]]
local function restoreParentDependency(jobKey, prev)
  local parentKey = redis.call("HGET", jobKey, "parentKey")
  if not parentKey or redis.call("EXISTS", parentKey) == 0 then
    return
  end
  local recorded
  if prev == "failed" then
    recorded = redis.call("ZREM", parentKey .. ":unsuccessful", jobKey) == 1
      or redis.call("HDEL", parentKey .. ":failed", jobKey) == 1
  else
    recorded = redis.call("HDEL", parentKey .. ":processed", jobKey) == 1
  end
  if recorded then
    redis.call("SADD", parentKey .. ":dependencies", jobKey)
  end
end
