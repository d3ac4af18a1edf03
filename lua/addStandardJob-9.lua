--[[
  Add a job that is ready now (no delay, no priority): LPUSH wait (RPUSH with opts.lifo) and
  wake a worker with the "0" marker unless the queue is paused or maxed. While paused the job
  still goes to wait (BullMQ 6: the meta flag alone gates workers).

  Input:
    KEYS[1] wait           KEYS[2] paused (legacy, unused)   KEYS[3] meta
    KEYS[4] id             KEYS[5] completed                 KEYS[6] delayed
    KEYS[7] active         KEYS[8] events                    KEYS[9] marker
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
local jobId, jobKey, maxEvents, opts, early, rolledBack = prepareNewJob(KEYS[4], KEYS[3], KEYS[5], eventsKey)
if early then
  return withRollback(early, rolledBack)
end
local owner = deduplicateJob(opts["de"], jobId, ARGV[9], KEYS[6], eventsKey, maxEvents, ARGV[1], true)
if owner then
  return withRollback(owner, rolledBack)
end
storeNewJob(eventsKey, jobKey, jobId, opts)
local q = {wait = KEYS[1], meta = KEYS[3], active = KEYS[7], events = eventsKey, marker = KEYS[9]}
enqueueStoredJob(q, jobId, ARGV[4], 0, 0, opts["lifo"], maxEvents)
return withRollback(jobId, rolledBack)
