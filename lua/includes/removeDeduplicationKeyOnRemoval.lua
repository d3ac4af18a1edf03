--[[
  A removed job gives up its deduplication id, but only if it still owns it (a newer job may
  have taken the id over after a ttl expired).
]]
local function removeDeduplicationKeyOnRemoval(prefix, jobId, jobKey)
  local deduplicationId = redis.call("HGET", jobKey, "deid")
  if deduplicationId then
    local deduplicationKey = prefix .. "de:" .. deduplicationId
    if redis.call("GET", deduplicationKey) == jobId then
      redis.call("DEL", deduplicationKey, prefix .. "dn:" .. deduplicationId)
    end
  end
end
