--[[
  cancelJob: stop a job wherever it is (docs/protocol.md §3.8; EchoMQ's own).

  A job that has not started (wait, the legacy paused list, prioritized, delayed) is taken out
  and fails for good at once, never to run: failedReason and finishedOn set, ZADD failed at
  now, its keep rule applied, its deduplication id freed if it owns it, its flow parent told as
  for any final failure (§3.6), and a capped "failed" written. An active job is told: SET
  <job>:cancel = the reason, PX = the request's TTL, only if no request is pending; its worker
  sees the key and ends the job as cancelled (the exits refuse anything else with -12). Every
  refusal is found before anything is written.

  Input:
    KEYS[1]  wait            KEYS[2]  paused (legacy)  KEYS[3]  prioritized
    KEYS[4]  delayed         KEYS[5]  active           KEYS[6]  completed
    KEYS[7]  failed          KEYS[8]  waiting-children KEYS[9]  meta
    KEYS[10] events          KEYS[11] job              KEYS[12] job:cancel
    ARGV[1]  jobId
    ARGV[2]  the request's reason (the value of <job>:cancel)
    ARGV[3]  failedReason of the job ("cancelled: <reason>")
    ARGV[4]  timestamp (ms): finishedOn
    ARGV[5]  key prefix ("<prefix>:{<queue>}:")
    ARGV[6]  TTL of the request (ms)
    ARGV[7..9] the job's keep rule on failure: count (-1 keep all, 0 delete), age s (""), limit ("")

  Output:
    1   taken out and failed (it was waiting, prioritized or delayed)
    2   the active job's worker is told
    0   a request for the active job is pending already: nothing written
    -1  no such job
    -3  finished already, or waiting for its children: nothing written

  Events: parent "waiting" (as moveToFinished's failure writes it); capped "failed" (jobId,
    failedReason, prev = the state it left: waiting, paused, prioritized or delayed).
]]
-- @include "getOrSetMaxEvents"
-- @include "removeDeduplicationKeyOnRemoval"
-- @include "updateParentOnChildFinished"
-- @include "removeJobKeys"
-- @include "removeFinishedJobs"
local jobKey = KEYS[11]
local jobId = ARGV[1]
local timestamp = ARGV[4]
local prefix = ARGV[5]
if redis.call("EXISTS", jobKey) == 0 then
  return -1
end
if redis.call("ZSCORE", KEYS[6], jobId) or redis.call("ZSCORE", KEYS[7], jobId)
    or redis.call("ZSCORE", KEYS[8], jobId) then
  return -3
end
local eventsCap = eventsCapArg(KEYS[9], false)
if not eventsCap then
  return redis.error_reply("ERR cancelJob: the queue's opts.maxLenEvents is not an integer >= 0")
end
local prev
if redis.call("LREM", KEYS[1], 0, jobId) > 0 then
  prev = "waiting"
elseif redis.call("ZREM", KEYS[3], jobId) > 0 then
  prev = "prioritized"
elseif redis.call("ZREM", KEYS[4], jobId) > 0 then
  prev = "delayed"
elseif redis.call("LREM", KEYS[2], 0, jobId) > 0 then
  prev = "paused"
elseif redis.call("LPOS", KEYS[5], jobId) then
  if redis.call("SET", KEYS[12], ARGV[2], "PX", ARGV[6], "NX") then
    return 2
  end
  return 0
else
  return -3
end

-- Taken out: it fails for good here, as moveToFinished fails a job (without an attempt).
redis.call("DEL", KEYS[12])
removeDeduplicationKeyOnRemoval(prefix, jobId, jobKey)
local attrs = redis.call("HMGET", jobKey, "parentKey", "parent")
updateParentOnChildFinished(jobKey, attrs[1], attrs[2], "failed", ARGV[3], timestamp)
local keepCount = tonumber(ARGV[7]) or -1
if keepCount ~= 0 then
  redis.call("ZADD", KEYS[7], timestamp, jobId)
  redis.call("HSET", jobKey, "failedReason", ARGV[3], "finishedOn", timestamp)
  redis.call("HDEL", jobKey, "defa")
  removeFinishedJobs(KEYS[7], prefix, timestamp, tonumber(ARGV[8]), keepCount, tonumber(ARGV[9]) or 1000)
else
  removeJobKeys(jobKey)
end
redis.call("XADD", KEYS[10], "MAXLEN", "~", eventsCap, "*", "event", "failed", "jobId", jobId,
  "failedReason", ARGV[3], "prev", prev)
return 1
