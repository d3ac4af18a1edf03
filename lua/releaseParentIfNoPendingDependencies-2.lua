--[[
  The last step of a flow add: a parent whose children were all already finished when the
  flow was written (duplicated custom ids of completed jobs) has no pending dependency left,
  so it must not wait in waiting-children forever. Move it on as a finishing child would;
  otherwise do nothing.

  Input:
    KEYS[1] job (the parent's hash)   KEYS[2] job:dependencies (the parent's pending children)
    ARGV[1] parent queue key "<prefix>:{<queue>}"   ARGV[2] parent id   ARGV[3] timestamp (ms)

  Output:
    1   the parent was released
    0   it still has pending children (or is not waiting for children)

  Events: waiting (prev=waiting-children) or delayed, in the parent's queue, when released.
]]
-- @include "moveParentToWait"
if redis.call("SCARD", KEYS[2]) > 0 or redis.call("EXISTS", KEYS[1]) == 0 then
  return 0
end
if redis.call("ZREM", ARGV[1] .. ":waiting-children", ARGV[2]) == 0 then
  return 0
end
moveParentToWait(ARGV[1], KEYS[1], ARGV[2], ARGV[3])
return 1
