--[[
  moveToFinished: an active job completed, or failed for good; optionally fetch the next job.

  The lock must be ours (released here, the id leaves "stalled"). Everything that can refuse
  (a missing job, pending or failed children, an atm or events cap that is not an integer, the
  lock, the active list) is found before anything is written. Flow bookkeeping runs before
  the job's own event (docs/protocol.md §3.6). atm + 1. Kept jobs go to completed/failed (score finishedOn) with
  returnvalue or failedReason and finishedOn (defa is cleared on failure); keep count 0
  deletes the job instead. Then auto-removal by age/count (no events), the events, and, when
  the worker collects metrics, the job is counted in metrics:<finished> (§3.4), kept or not.

  Input:
    KEYS[1]  wait            KEYS[2]  active          KEYS[3]  prioritized
    KEYS[4]  events          KEYS[5]  stalled         KEYS[6]  limiter
    KEYS[7]  delayed         KEYS[8]  paused (legacy, unused)
    KEYS[9]  meta            KEYS[10] pc              KEYS[11] <finished> (completed or failed)
    KEYS[12] job hash        KEYS[13] metrics:<finished> (its list is KEYS[13] .. ":data")
    KEYS[14] marker
    ARGV[1]  jobId
    ARGV[2]  timestamp (ms): finishedOn
    ARGV[3]  field name: "returnvalue" or "failedReason"
    ARGV[4]  its value (JSON for returnvalue, plain text for failedReason)
    ARGV[5]  target: "completed" or "failed"
    ARGV[6]  fetch next: "1" or "0"
    ARGV[7]  key prefix ("<prefix>:{<queue>}:")
    ARGV[8]  lock token ("0" = no lock taken)
    ARGV[9]  keep count: -1 keep all, 0 delete the job, n keep the newest n
    ARGV[10] keep age in seconds ("" = none)
    ARGV[11] keep limit: most jobs removed by age per call ("" = 1000)
    ARGV[12] attempts (the job's opts.attempts, 0 when unset)
    ARGV[13] fields to HSET first, JSON array [field, value ...] ("" = none)
    ARGV[14..17] for fetch next: lock duration, worker name, limiter max, limiter duration
                 (the next lock reuses ARGV[8])
    ARGV[18] metrics: the most data points kept, an integer >= 1 ("" or absent = collect none)
    ARGV[19] "1": this final failure is the job's cancellation (it deletes <job>:cancel); else,
             while a cancel request is pending, the move is refused with -12 (§3.8)

  Output:
    0                       done, nothing fetched
    {hash, jobId, 0, 0}     done, and the next job is active and locked
    {0, 0, ttl|0, dueMs|0}  done, nothing fetched (rate limited / paused / next delayed due)
    -1 no job, -2 lock missing, -3 not active, -4 pending children, -6 lock not ours,
    -9 failed children, -12 a cancel request is pending (ARGV[19] not "1")

  Events: parent "waiting" prev=waiting-children (or "delayed"); "completed" (jobId,
    returnvalue, prev=active) or "failed" (jobId, failedReason, prev=active), capped: the
    trim for every uncapped write;
    "retries-exhausted" (jobId, attemptsMade) when failed and atm >= attempts; then from
    fetch next "waiting" prev=delayed / "active"; "drained" when nothing was fetched and wait,
    active and prioritized are empty and no delayed job exists (docs/protocol.md §3.4).
]]
-- @include "getOrSetMaxEvents"
-- @include "releaseActiveJob"
-- @include "updateJobFieldsFromJson"
-- @include "updateParentOnChildFinished"
-- @include "removeJobKeys"
-- @include "removeFinishedJobs"
-- @include "workerOptionsFromArgs"
-- @include "fetchNextJob"
-- @include "isSafeInteger"
-- @include "collectMetrics"
local jobKey = KEYS[12]
local jobId = ARGV[1]
local timestamp = ARGV[2]
local target = ARGV[5]
local prefix = ARGV[7]
local keepCount, keepAge, keepLimit = -1, nil, 1000
if ARGV[9] ~= "-1" or ARGV[10] ~= "" or ARGV[11] ~= "" then  -- else the default, keep all: nothing to parse
  keepCount = tonumber(ARGV[9]) or -1
  keepAge = tonumber(ARGV[10])
  keepLimit = tonumber(ARGV[11]) or 1000
  if not (isSafeInteger(keepCount) and isSafeInteger(keepLimit) and (keepAge == nil or isSafeInteger(keepAge))) then
    return redis.error_reply("ERR moveToFinished: the keep count, age and limit must be integers within 2^53")
  end
end
local maxMetricsPoints = tonumber(ARGV[18])
if ARGV[18] ~= nil and ARGV[18] ~= "" and not (isSafeInteger(maxMetricsPoints) and maxMetricsPoints >= 1) then
  return redis.error_reply("ERR moveToFinished: the metrics data points must be an integer >= 1 within 2^53")
end

-- One read of the job for what follows: its flow parent, deduplication id and attempts made;
-- "timestamp" (every producer writes it) stands in for EXISTS, which runs only without it.
local attrs = redis.call("HMGET", jobKey, "parentKey", "parent", "deid", "atm", "timestamp")
if not attrs[5] and redis.call("EXISTS", jobKey) == 0 then
  return -1
end
if target == "completed"
    and redis.call("EXISTS", jobKey .. ":dependencies", jobKey .. ":unsuccessful") > 0 then
  -- a set or zset without members does not exist: one call in the common case, no children
  if redis.call("SCARD", jobKey .. ":dependencies") ~= 0 then
    return -4
  end
  return -9
end
-- the attempts made so far, as the fields the worker sends (a repaired atm) leave them
local attemptsMade = tonumber((ARGV[13] ~= "" and fieldFromJson(ARGV[13], "atm")) or attrs[4] or 0)
if not isSafeInteger(attemptsMade) then
  return redis.error_reply("ERR moveToFinished: the job's atm is not an integer")
end
attemptsMade = attemptsMade + 1
-- meta read once: the events cap here, the limiter, pause and concurrency for fetch next
local meta = redis.call("HMGET", KEYS[9], "opts.maxLenEvents", "max", "duration", "paused", "concurrency")
local eventsCap = eventsCapArg(KEYS[9], meta[1])
if not eventsCap then
  return redis.error_reply("ERR moveToFinished: the queue's opts.maxLenEvents is not an integer >= 0")
end
local code = releaseActiveJob(jobKey, KEYS[2], KEYS[5], ARGV[8], jobId, ARGV[13], ARGV[19] == "1")
if code < 0 then
  return code
end

if attrs[3] then
  local dedupKey = prefix .. "de:" .. attrs[3]
  if redis.call("GET", dedupKey) == jobId then
    redis.call("DEL", dedupKey)
  end
end
updateParentOnChildFinished(jobKey, attrs[1], attrs[2], target, ARGV[4], timestamp)

if keepCount ~= 0 then
  redis.call("ZADD", KEYS[11], timestamp, jobId)
  redis.call("HSET", jobKey, ARGV[3], ARGV[4], "finishedOn", timestamp, "atm", attemptsMade)
  if target == "failed" then
    redis.call("HDEL", jobKey, "defa")
  end
  removeFinishedJobs(KEYS[11], prefix, timestamp, keepAge, keepCount, keepLimit)
else
  removeJobKeys(jobKey)
end

-- the queue's one capped write here trims the stream for the uncapped ones of every script
redis.call("XADD", KEYS[4], "MAXLEN", "~", eventsCap, "*", "event", target, "jobId", jobId, ARGV[3], ARGV[4],
  "prev", "active")
if target == "failed" and attemptsMade >= (tonumber(ARGV[12]) or 0) then
  redis.call("XADD", KEYS[4], "*", "event", "retries-exhausted", "jobId", jobId,
    "attemptsMade", attemptsMade)
end
if maxMetricsPoints then
  collectMetrics(KEYS[13], KEYS[13] .. ":data", maxMetricsPoints, timestamp)
end

local q = {wait = KEYS[1], active = KEYS[2], prioritized = KEYS[3], events = KEYS[4],
           limiter = KEYS[6], delayed = KEYS[7], meta = KEYS[9], pc = KEYS[10], marker = KEYS[14]}
if ARGV[6] == "1" then
  local w = workerOptionsFromArgs({ARGV[8], ARGV[14], ARGV[15], ARGV[16], ARGV[17]}, 1)
  local next = fetchNextJob(q, prefix, timestamp, w, {meta[2], meta[3], meta[4], meta[5]})
  if next then
    return next
  end
end
if redis.call("LLEN", q.wait) == 0 and redis.call("LLEN", q.active) == 0
    and redis.call("ZCARD", q.prioritized) == 0 then
  redis.call("XADD", q.events, "*", "event", "drained")
end
return 0
