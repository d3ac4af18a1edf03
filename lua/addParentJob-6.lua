--[[
  Add the parent of a flow: the job waits in waiting-children (score = timestamp) until its
  last child completes; the worker's finishing script then moves it to wait, prioritized or
  delayed. Children are added after it, each naming this job as parent.

  Input:
    KEYS[1] meta   KEYS[2] id   KEYS[3] delayed   KEYS[4] waiting-children   KEYS[5] completed
    KEYS[6] events
    ARGV[1..11] the add layout described in includes/prepareNewJob.lua

  Output:
    jobId  the new job's id, or the existing one (duplicated custom id, deduplication hit);
           {jobId, n} when the id counter had gone back to n (includes/prepareNewJob.lua)
    -5     this parent's own parent does not exist
    -7     the existing custom-id job belongs to another parent

  Events: added, waiting-children; or duplicated; or deduplicated.
]]
-- @include "prepareNewJob"
-- @include "deduplicateJob"
-- @include "storeNewJob"
local eventsKey = KEYS[6]
local jobId, jobKey, maxEvents, opts, early, rolledBack = prepareNewJob(KEYS[2], KEYS[1], KEYS[5], eventsKey)
if early then
  return withRollback(early, rolledBack)
end
local owner = deduplicateJob(opts["de"], jobId, ARGV[9], KEYS[3], eventsKey, maxEvents, ARGV[1], false)
if owner then
  return withRollback(owner, rolledBack)
end
storeNewJob(eventsKey, jobKey, jobId, opts)
redis.call("ZADD", KEYS[4], ARGV[4], jobId)
redis.call("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "waiting-children", "jobId", jobId)
return withRollback(jobId, rolledBack)
