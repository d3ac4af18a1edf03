--[[
  Retry finished jobs in bulk (Queue.retry_jobs): up to `count` jobs of <finished> (completed
  or failed) that finished at or before a timestamp, oldest first, each as reprocessJob retries
  one (no counter is reset). A member whose hash is gone is dropped from the set. The client
  calls again while a call took `count` ids.

  Input:
    KEYS[1] <finished>   KEYS[2] wait   KEYS[3] prioritized   KEYS[4] pc   KEYS[5] meta
    KEYS[6] active   KEYS[7] marker   KEYS[8] events
    ARGV[1] key prefix "<base>:"   ARGV[2] "completed" or "failed": the state <finished> names
    ARGV[3] count (an integer >= 1)   ARGV[4] finished at or before (ms)

  Output:
    {taken, retried}: ids taken from the set, and how many of them were jobs put back in line
    an error reply, writing nothing, for a bad state or count

  Events: capped "waiting" (jobId, prev=<state>) per job, oldest first.
]]
-- @include "requeueSetMembers"
-- @include "isSafeInteger"
local prefix, state = ARGV[1], ARGV[2]
local count = tonumber(ARGV[3])
if state ~= "completed" and state ~= "failed" then
  return redis.error_reply("ERR retryJobs: state must be completed or failed, got " .. tostring(state))
end
if not (isSafeInteger(count) and count >= 1) then
  return redis.error_reply("ERR retryJobs: count must be an integer >= 1, got " .. tostring(ARGV[3]))
end
if not isSafeInteger(tonumber(ARGV[4])) then
  return redis.error_reply("ERR retryJobs: timestamp must be an integer (ms), got " .. tostring(ARGV[4]))
end
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], 0, ARGV[4], "LIMIT", 0, ARGV[3])
local q = {wait = KEYS[2], prioritized = KEYS[3], pc = KEYS[4], meta = KEYS[5], active = KEYS[6],
  marker = KEYS[7], events = KEYS[8]}
return requeueSetMembers(KEYS[1], ids, prefix, state, q)
