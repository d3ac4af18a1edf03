--[[
  extendLock: renew one job's lock if this worker still holds it, and drop the job from the
  stalled set (it is demonstrably alive).

  Input:
    KEYS[1] the job's lock key    KEYS[2] stalled
    ARGV[1] lock token            ARGV[2] lock duration (ms)    ARGV[3] jobId

  Output: 1 renewed, 0 the lock is gone or belongs to someone else.
  Events: none.
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  redis.call("SREM", KEYS[2], ARGV[3])
  return 1
end
return 0
