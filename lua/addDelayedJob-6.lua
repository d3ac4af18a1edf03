--[[
  Add a job with opts.delay > 0: ZADD delayed with score (timestamp + delay) * 4096 + seq and
  move the "1" marker to the earliest due time. The stored priority is applied when the job
  is promoted.

  Input:
    KEYS[1] marker   KEYS[2] meta   KEYS[3] id   KEYS[4] delayed   KEYS[5] completed
    KEYS[6] events
    ARGV[1..11] the add layout described in includes/prepareNewJob.lua

  Output:
    jobId  the new job's id, or the existing one (duplicated custom id, deduplication hit);
           {jobId, n} when the id counter had gone back to n (includes/prepareNewJob.lua)
    -5     the parent job does not exist
    -7     the existing custom-id job belongs to another parent

  Events: added, delayed (delay = absolute due time in ms); or duplicated; or deduplicated
  (replace mode: removed, deduplicated, added, delayed).
]]
-- @include "prepareNewJob"
-- @include "deduplicateJob"
-- @include "storeNewJob"
-- @include "enqueueStoredJob"
local eventsKey = KEYS[6]
local jobId, jobKey, maxEvents, opts, early, rolledBack = prepareNewJob(KEYS[3], KEYS[2], KEYS[5], eventsKey)
if early then
  return withRollback(early, rolledBack)
end
local owner = deduplicateJob(opts["de"], jobId, ARGV[9], KEYS[4], eventsKey, maxEvents, ARGV[1], true)
if owner then
  return withRollback(owner, rolledBack)
end
local delay = storeNewJob(eventsKey, jobKey, jobId, opts)
local q = {delayed = KEYS[4], marker = KEYS[1], events = eventsKey}
enqueueStoredJob(q, jobId, ARGV[4], delay, 0, false, maxEvents)
return withRollback(jobId, rolledBack)
