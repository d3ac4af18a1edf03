--[[
  Give a delayed job a new delay, counted from ARGV[2] (now): re-score it in delayed, store the
  relative delay in its hash and move the delay marker.

  Input:
    KEYS[1] delayed   KEYS[2] meta   KEYS[3] marker   KEYS[4] events
    ARGV[1] new delay (ms)   ARGV[2] timestamp (ms)   ARGV[3] job id   ARGV[4] job key

  Output:
    0   changed
    -1  the job does not exist
    -3  the job is not delayed

  Events: delayed (jobId, delay = the new absolute due time in ms).
]]
-- @include "toIntString"
-- @include "getDelayedScore"
-- @include "getOrSetMaxEvents"
-- @include "addDelayMarkerIfNeeded"
local jobId, jobKey = ARGV[3], ARGV[4]
if redis.call("EXISTS", jobKey) == 0 then
  return -1
end
local delay = tonumber(ARGV[1])
local score, due = getDelayedScore(KEYS[1], ARGV[2], delay)
if redis.call("ZREM", KEYS[1], jobId) == 0 then
  return -3
end
redis.call("HSET", jobKey, "delay", toIntString(delay))
redis.call("ZADD", KEYS[1], toIntString(score), jobId)
local maxEvents = getOrSetMaxEvents(KEYS[2])
redis.call("XADD", KEYS[4], "MAXLEN", "~", maxEvents, "*", "event", "delayed", "jobId", jobId,
  "delay", toIntString(due))
addDelayMarkerIfNeeded(KEYS[3], KEYS[1])
return 0
