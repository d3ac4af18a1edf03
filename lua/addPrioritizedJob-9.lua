--[[
  Add a job with opts.priority > 0 and no delay: ZADD prioritized with score
  priority * 2^32 + (INCR pc), so equal priorities stay FIFO, and wake a worker with the "0"
  marker unless the queue is paused or maxed.

  Input:
    KEYS[1] marker   KEYS[2] meta     KEYS[3] id       KEYS[4] prioritized   KEYS[5] delayed
    KEYS[6] completed                 KEYS[7] active   KEYS[8] events        KEYS[9] pc
    ARGV[1..11] the add layout described in includes/prepareNewJob.lua

  Output:
    jobId  the new job's id, or the existing one (duplicated custom id, deduplication hit);
           {jobId, n} when the id counter had gone back to n (includes/prepareNewJob.lua)
    -5     the parent job does not exist
    -7     the existing custom-id job belongs to another parent

  Events: added, waiting; or duplicated; or deduplicated (replace mode: removed, deduplicated,
  added, waiting).
]]
-- @include "prepareNewJob"
-- @include "deduplicateJob"
-- @include "storeNewJob"
-- @include "enqueueStoredJob"
local eventsKey = KEYS[8]
local jobId, jobKey, maxEvents, opts, early, rolledBack = prepareNewJob(KEYS[3], KEYS[2], KEYS[6], eventsKey)
if early then
  return withRollback(early, rolledBack)
end
local owner = deduplicateJob(opts["de"], jobId, ARGV[9], KEYS[5], eventsKey, maxEvents, ARGV[1], true)
if owner then
  return withRollback(owner, rolledBack)
end
local _, priority = storeNewJob(eventsKey, jobKey, jobId, opts)
local q = {prioritized = KEYS[4], pc = KEYS[9], meta = KEYS[2], active = KEYS[7],
           events = eventsKey, marker = KEYS[1]}
enqueueStoredJob(q, jobId, ARGV[4], 0, priority, false, maxEvents)
return withRollback(jobId, rolledBack)
