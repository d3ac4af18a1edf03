--[[
  Make jobId the owner of a deduplication id; with a ttl (ms) the ownership expires by itself.
]]
local function setDeduplicationKey(deduplicationKey, jobId, ttl)
  ttl = tonumber(ttl)
  if ttl and ttl > 0 then
    redis.call("SET", deduplicationKey, jobId, "PX", ttl)
  else
    redis.call("SET", deduplicationKey, jobId)
  end
end
