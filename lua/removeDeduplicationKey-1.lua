--[[
  Give up a deduplication id on behalf of one job: DEL "<base>:de:<id>" only while that job
  still owns it (a ttl may have expired and a newer job taken the id over).

  Input:
    KEYS[1] prefix, the queue's key prefix "<base>:" (a key, so Cluster routes it)
    ARGV[1] deduplication id   ARGV[2] job id

  Output:
    1   removed
    0   the id is free or owned by another job: nothing changed

  Events: none.
]]
local deduplicationKey = KEYS[1] .. "de:" .. ARGV[1]
if redis.call("GET", deduplicationKey) == ARGV[2] then
  return redis.call("DEL", deduplicationKey)
end
return 0
