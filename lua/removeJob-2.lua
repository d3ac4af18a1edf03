--[[
  Remove a job from any state with all its keys (and, optionally, its children), unless a
  worker holds its lock or it is the pending iteration of a live job scheduler.

  Input:
    KEYS[1] job key      KEYS[2] repeat (job schedulers zset)
    ARGV[1] job id       ARGV[2] "1" to remove the children too   ARGV[3] key prefix "<base>:"

  Output:
    1   removed
    2   there was no such job (a stray id of it in a state key is still cleared)
    0   not removed: the job, or one of its children, is locked by a worker
    -8  the job is a job scheduler's current iteration (remove the scheduler instead)

  Events: removed (jobId, prev = the raw state name); for a parent whose last pending child
  this was, waiting (prev=waiting-children) in the parent's queue.
]]
-- @include "isJobSchedulerJob"
-- @include "isJobLocked"
-- @include "removeJobWithChildren"
local jobId, removeChildren, prefix = ARGV[1], ARGV[2] == "1", ARGV[3]
if isJobSchedulerJob(jobId, KEYS[1], KEYS[2]) then
  return -8
end
if isJobLocked(prefix, jobId, removeChildren) then
  return 0
end
local existed = redis.call("EXISTS", KEYS[1]) == 1
removeJobWithChildren(prefix, jobId, removeChildren)
if existed then
  return 1
end
return 2
