--[[
  moveToActive: hand the next job to a worker, locked.

  Due delayed jobs are promoted first (up to 1000, "waiting" prev=delayed each). Then, unless
  the queue is paused (meta "paused"), maxed (meta "concurrency") or rate limited, the next
  job moves wait -> active (or prioritized -> active), gets a lock with a TTL, processedOn,
  pb, ats + 1, and the "active" prev=waiting event.

  Input:
    KEYS[1]  wait            KEYS[2]  active          KEYS[3]  prioritized
    KEYS[4]  events          KEYS[5]  stalled         KEYS[6]  limiter
    KEYS[7]  delayed         KEYS[8]  paused (legacy, unused)
    KEYS[9]  meta            KEYS[10] pc              KEYS[11] marker
    ARGV[1]  key prefix ("<prefix>:{<queue>}:")
    ARGV[2]  timestamp (ms)
    ARGV[3]  lock token ("0" = take no lock)
    ARGV[4]  lock duration (ms)
    ARGV[5]  worker name ("" = none; stored as pb)
    ARGV[6]  worker limiter max ("" = none)
    ARGV[7]  worker limiter duration ms ("" = none)

  Output:
    {flat job hash, jobId, 0, 0}   a job is now active and locked
    {0, 0, ttl, 0}                 rate limited for ttl ms
    {0, 0, 0, dueMs}               nothing ready; the next delayed job is due at dueMs
    {0, 0, 0, 0}                   nothing ready (or paused / maxed)

  Events: "waiting" prev=delayed per promoted job, "active" prev=waiting.
]]
-- @include "workerOptionsFromArgs"
-- @include "fetchNextJob"
local q = {wait = KEYS[1], active = KEYS[2], prioritized = KEYS[3], events = KEYS[4],
           limiter = KEYS[6], delayed = KEYS[7], meta = KEYS[9], pc = KEYS[10], marker = KEYS[11]}
local w = workerOptionsFromArgs(ARGV, 3)
local result = fetchNextJob(q, ARGV[1], ARGV[2], w)
if result then
  return result
end
return {0, 0, 0, 0}
