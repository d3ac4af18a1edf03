--[[
  Retry one finished job (Job.retry): it leaves <finished> (completed or failed) for
  prioritized when it has a priority, else for wait (RPUSH with opts lifo, else LPUSH).
  finishedOn, processedOn and the outcome (returnvalue or failedReason) are deleted, and the
  attempt counters when asked (atm with the legacy attemptsMade; ats); stacktrace, logs and
  progress stay. A flow child becomes a pending dependency of its parent again. A worker is
  woken unless the queue is paused or maxed.

  Input:
    KEYS[1] job   KEYS[2] <finished>   KEYS[3] wait   KEYS[4] prioritized   KEYS[5] pc
    KEYS[6] meta   KEYS[7] active   KEYS[8] marker   KEYS[9] events
    ARGV[1] job id   ARGV[2] "completed" or "failed": the state <finished> names
    ARGV[3] "1": reset attempts made (HDEL atm, attemptsMade)
    ARGV[4] "1": reset attempts started (HDEL ats)

  Output:
    0   retried
    -1  the job does not exist
    -3  the job is not in that state
    an error reply, writing nothing, for a state that is neither completed nor failed

  Events: capped "waiting" (jobId, prev=<state>).
]]
-- @include "getOrSetMaxEvents"
-- @include "isQueuePausedOrMaxed"
-- @include "requeueJob"
local jobKey, jobId, state = KEYS[1], ARGV[1], ARGV[2]
if state ~= "completed" and state ~= "failed" then
  return redis.error_reply("ERR reprocessJob: state must be completed or failed, got " .. tostring(state))
end
if redis.call("EXISTS", jobKey) == 0 then
  return -1
end
if redis.call("ZREM", KEYS[2], jobId) == 0 then
  return -3
end
local resets = {}
if ARGV[3] == "1" then
  table.insert(resets, "atm")
  table.insert(resets, "attemptsMade")
end
if ARGV[4] == "1" then
  table.insert(resets, "ats")
end
local q = {wait = KEYS[3], prioritized = KEYS[4], pc = KEYS[5], marker = KEYS[8], events = KEYS[9]}
local pausedOrMaxed = isQueuePausedOrMaxed(KEYS[6], KEYS[7])
requeueJob(q, jobKey, jobId, state, resets, pausedOrMaxed, getOrSetMaxEvents(KEYS[6]))
return 0
