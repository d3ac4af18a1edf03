--[[
  extendLocks: renew the locks of every job a worker runs, in one round trip.

  Input:
    KEYS[1] stalled
    ARGV[1] key prefix ("<prefix>:{<queue>}:")
    ARGV[2] lock duration (ms)
    ARGV[3], ARGV[4] ...  pairs of jobId, lock token

  Output: the ids whose lock could not be renewed (missing, or held by another token).
  Events: none.
]]
local failed = {}
for i = 3, #ARGV, 2 do
  local jobId = ARGV[i]
  local lockKey = ARGV[1] .. jobId .. ":lock"
  if redis.call("GET", lockKey) == ARGV[i + 1] then
    redis.call("SET", lockKey, ARGV[i + 1], "PX", ARGV[2])
    redis.call("SREM", KEYS[1], jobId)
  else
    table.insert(failed, jobId)
  end
end
return failed
