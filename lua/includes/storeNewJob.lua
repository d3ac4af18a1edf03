--[[
  Store a new job hash from the add scripts' flat ARGV (see prepareNewJob) and add it to its
  parent's pending dependencies. Returns the delay and priority read from opts.
]]
-- @include "toIntString"
-- @include "storeJob"
local function storeNewJob(eventsKey, jobKey, jobId, opts)
  local delay = tonumber(opts["delay"]) or 0
  local priority = tonumber(opts["priority"]) or 0
  local deduplicationId = ""
  if type(opts["de"]) == "table" and opts["de"]["id"] then
    deduplicationId = opts["de"]["id"]
  end
  storeJob(eventsKey, jobKey, jobId, ARGV[3], ARGV[10], ARGV[11], ARGV[4], toIntString(delay),
    toIntString(priority), ARGV[8], deduplicationId, ARGV[5], ARGV[7])
  if ARGV[6] ~= "" then
    redis.call("SADD", ARGV[6], jobKey)
  end
  return delay, priority
end
