--[[
  moveToDelayed: a failed attempt retries after its backoff. The job leaves active (the lock
  must be ours), atm + 1 unless skipped, its hash "delay" becomes the backoff, and it goes to
  delayed at score (now + delay) * 4096 + seq; optionally the next job is fetched.

  Input:
    KEYS[1]  marker          KEYS[2]  active          KEYS[3]  prioritized
    KEYS[4]  delayed         KEYS[5]  job hash        KEYS[6]  events
    KEYS[7]  meta            KEYS[8]  stalled         KEYS[9]  wait
    KEYS[10] limiter         KEYS[11] pc
    ARGV[1]  key prefix      ARGV[2]  timestamp (ms)  ARGV[3]  jobId
    ARGV[4]  lock token      ARGV[5]  delay (ms)      ARGV[6]  skip attempt ("1" = no atm + 1)
    ARGV[7]  fields to HSET first, JSON array [field, value ...] ("" = none)
    ARGV[8]  fetch next ("1"/"0")
    ARGV[9..12] for fetch next: lock duration, worker name, limiter max, limiter duration

  Output: 0, or {hash, jobId, 0, 0} when the next job was fetched;
    -1 no job, -2 lock missing, -3 not active, -6 lock not ours, -12 a cancel request is pending (§3.8).

  Events: capped "delayed" (jobId, delay = absolute due ms); from fetch next "waiting"
    prev=delayed and "active".
]]
-- @include "toIntString"
-- @include "getOrSetMaxEvents"
-- @include "getDelayedScore"
-- @include "addDelayMarkerIfNeeded"
-- @include "releaseActiveJob"
-- @include "workerOptionsFromArgs"
-- @include "fetchNextJob"
local jobKey = KEYS[5]
local jobId = ARGV[3]
if redis.call("EXISTS", jobKey) == 0 then
  return -1
end
local code = releaseActiveJob(jobKey, KEYS[2], KEYS[8], ARGV[4], jobId, ARGV[7])
if code < 0 then
  return code
end
local score, due = getDelayedScore(KEYS[4], ARGV[2], ARGV[5])
if ARGV[6] ~= "1" then
  redis.call("HINCRBY", jobKey, "atm", 1)
end
redis.call("HSET", jobKey, "delay", ARGV[5])
local maxEvents = getOrSetMaxEvents(KEYS[7])
redis.call("ZADD", KEYS[4], toIntString(score), jobId)
redis.call("XADD", KEYS[6], "MAXLEN", "~", maxEvents, "*", "event", "delayed", "jobId", jobId,
  "delay", toIntString(due))

if ARGV[8] == "1" then
  local q = {wait = KEYS[9], active = KEYS[2], prioritized = KEYS[3], events = KEYS[6],
             limiter = KEYS[10], delayed = KEYS[4], meta = KEYS[7], pc = KEYS[11], marker = KEYS[1]}
  local w = workerOptionsFromArgs({ARGV[4], ARGV[9], ARGV[10], ARGV[11], ARGV[12]}, 1)
  local next = fetchNextJob(q, ARGV[1], ARGV[2], w)
  if next and type(next[1]) == "table" then
    return next
  end
end
addDelayMarkerIfNeeded(KEYS[1], KEYS[4])
return 0
