--[[
  retryJob: a failed attempt retries at once (no backoff delay). Once the checks passed, due
  delayed jobs are promoted; then the job leaves active (the lock must be ours) for wait (LPUSH, or RPUSH for lifo) or
  prioritized, atm + 1, and a base marker wakes a worker unless paused or maxed.

  Input:
    KEYS[1]  active          KEYS[2]  wait            KEYS[3]  paused (legacy, unused)
    KEYS[4]  job hash        KEYS[5]  meta            KEYS[6]  events
    KEYS[7]  delayed         KEYS[8]  prioritized     KEYS[9]  pc
    KEYS[10] marker          KEYS[11] stalled
    ARGV[1]  key prefix      ARGV[2]  timestamp (ms)  ARGV[3]  "LPUSH" or "RPUSH" (lifo)
    ARGV[4]  jobId           ARGV[5]  lock token
    ARGV[6]  fields to HSET first, JSON array [field, value ...] ("" = none)

  Output: 0; -1 no job, -2 lock missing, -3 not active, -6 lock not ours, -12 a cancel request is pending (§3.8).

  Events: "waiting" prev=delayed per promoted job; capped "waiting" (jobId, prev=active).
]]
-- @include "toIntString"
-- @include "getOrSetMaxEvents"
-- @include "getPriorityScore"
-- @include "isQueuePausedOrMaxed"
-- @include "addBaseMarkerIfNeeded"
-- @include "promoteDelayedJobs"
-- @include "releaseActiveJob"
local q = {wait = KEYS[2], active = KEYS[1], prioritized = KEYS[8], events = KEYS[6],
           delayed = KEYS[7], meta = KEYS[5], pc = KEYS[9], marker = KEYS[10]}
local jobKey = KEYS[4]
local jobId = ARGV[4]
if redis.call("EXISTS", jobKey) == 0 then
  return -1
end
local code = releaseActiveJob(jobKey, q.active, KEYS[11], ARGV[5], jobId, ARGV[6])
if code < 0 then
  return code
end
promoteDelayedJobs(q, ARGV[1], ARGV[2], isQueuePausedOrMaxed(q.meta, q.active))
local priority = tonumber(redis.call("HGET", jobKey, "priority")) or 0
local pausedOrMaxed = isQueuePausedOrMaxed(q.meta, q.active)
if priority > 0 then
  redis.call("ZADD", q.prioritized, toIntString(getPriorityScore(priority, q.pc)), jobId)
elseif ARGV[3] == "RPUSH" then
  redis.call("RPUSH", q.wait, jobId)
else
  redis.call("LPUSH", q.wait, jobId)
end
addBaseMarkerIfNeeded(q.marker, pausedOrMaxed)
redis.call("HINCRBY", jobKey, "atm", 1)
local maxEvents = getOrSetMaxEvents(q.meta)
redis.call("XADD", q.events, "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", jobId,
  "prev", "active")
return 0
