--[[
  Read one job scheduler: its hash and the millis of its pending iteration, in one step (so
  the two cannot disagree).

  Input:
    KEYS[1]  repeat
    ARGV[1]  scheduler id

  Output:
    {flat HGETALL of repeat:<id>, score as a string}, or an empty array when the id is not
    in the repeat set.

  Events: none.
]]
local score = redis.call("ZSCORE", KEYS[1], ARGV[1])
if not score then
  return {}
end
return {redis.call("HGETALL", KEYS[1] .. ":" .. ARGV[1]), score}
