--[[
  moveToWaitingChildren: a running parent job waits for the children it just added. If it has
  pending dependencies (or the given child is still one of them) it leaves active (the lock must
  be ours) for waiting-children, scored by the timestamp; a child completing last moves it back
  to wait (see updateParentOnChildFinished).

  Input:
    KEYS[1] active            KEYS[2] waiting-children    KEYS[3] job hash
    KEYS[4] job:dependencies  KEYS[5] job:unsuccessful    KEYS[6] stalled
    KEYS[7] events
    ARGV[1] lock token        ARGV[2] child key ("" = any pending child)
    ARGV[3] timestamp (ms)    ARGV[4] jobId               ARGV[5] key prefix (unused)

  Output: 0 moved; 1 nothing pending (the job stays active); -1 no job, -2 lock missing,
    -3 not active, -6 lock not ours, -9 a child failed with failParentOnFailure.

  Events: "waiting-children" (jobId, prev=active), uncapped.
]]
-- @include "checkLock"
-- @include "removeLock"
local jobKey, jobId = KEYS[3], ARGV[4]
if redis.call("EXISTS", jobKey) == 0 then
  return -1
end
if redis.call("ZCARD", KEYS[5]) ~= 0 then
  return -9
end
local pending
if ARGV[2] ~= "" then
  pending = redis.call("SISMEMBER", KEYS[4], ARGV[2]) == 1
else
  pending = redis.call("SCARD", KEYS[4]) > 0
end
if not pending then
  return 1
end
local code = checkLock(jobKey, ARGV[1])
if code < 0 then
  return code
end
if redis.call("LREM", KEYS[1], -1, jobId) < 1 then
  return -3
end
removeLock(jobKey, KEYS[6], ARGV[1], jobId)
redis.call("ZADD", KEYS[2], ARGV[3], jobId)
redis.call("XADD", KEYS[7], "*", "event", "waiting-children", "jobId", jobId, "prev", "active")
return 0
