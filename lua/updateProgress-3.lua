--[[
  Store a job's progress (JSON: a number or an object) and announce it.

  Input:
    KEYS[1] job key   KEYS[2] events   KEYS[3] meta
    ARGV[1] job id    ARGV[2] progress JSON

  Output:
    0   stored
    -1  the job does not exist

  Events: progress (jobId, data = the progress JSON).
]]
-- @include "getOrSetMaxEvents"
if redis.call("EXISTS", KEYS[1]) == 0 then
  return -1
end
local maxEvents = getOrSetMaxEvents(KEYS[3])
redis.call("HSET", KEYS[1], "progress", ARGV[2])
redis.call("XADD", KEYS[2], "MAXLEN", "~", maxEvents, "*", "event", "progress", "jobId", ARGV[1],
  "data", ARGV[2])
return 0
