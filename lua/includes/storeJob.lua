--[[
  Write a job hash in the protocol's field order (name data opts timestamp delay priority,
  then rjk, deid, parentKey and parent when given) and XADD the uncapped "added" event.
  "opts" is JSON text; "data" is stored verbatim as the producer serialised it.
]]
local function storeJob(eventsKey, jobKey, jobId, name, data, opts, timestamp, delay, priority,
                        repeatJobKey, deduplicationId, parentKey, parentJson)
  local fields = {"name", name, "data", data, "opts", opts, "timestamp", timestamp,
                  "delay", delay, "priority", priority}
  if repeatJobKey and repeatJobKey ~= "" then
    table.insert(fields, "rjk")
    table.insert(fields, repeatJobKey)
  end
  if deduplicationId and deduplicationId ~= "" then
    table.insert(fields, "deid")
    table.insert(fields, deduplicationId)
  end
  if parentKey and parentKey ~= "" then
    table.insert(fields, "parentKey")
    table.insert(fields, parentKey)
    table.insert(fields, "parent")
    table.insert(fields, parentJson)
  end
  redis.call("HSET", jobKey, unpack(fields))
  redis.call("XADD", eventsKey, "*", "event", "added", "jobId", jobId, "name", name)
end
