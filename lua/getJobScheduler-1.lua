--[[
  Read one job scheduler: its hash and the millis of its pending iteration, in one step (so
  the two cannot disagree).

  Input:
    KEYS[1]  repeat
    ARGV[1]  scheduler id

  Output:
    {flat HGETALL of repeat:<id>, score as a string, paused}, or an empty array when the id is
    not in the repeat set; paused is 1 when <base>:schedulers:paused (built from the repeat key, under
    the queue's hash tag) holds the scheduler at that score (§4.6), else 0.

  Events: none.
]]
local score = redis.call("ZSCORE", KEYS[1], ARGV[1])
if not score then
  return {}
end
local parkedSet = string.sub(KEYS[1], 1, -7) .. "schedulers:paused"
local paused = redis.call("ZSCORE", parkedSet, ARGV[1]) == score and 1 or 0
return {redis.call("HGETALL", KEYS[1] .. ":" .. ARGV[1]), score, paused}
