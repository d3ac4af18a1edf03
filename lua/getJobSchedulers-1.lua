--[[
  Read a rank range of job schedulers in one round trip: ids, pending-iteration millis and
  hashes together (BullMQ reads the same data with ZRANGE plus one HGETALL per id). A member
  whose hash is missing comes back with an empty hash; the caller skips it (nothing is deleted).

  Input:
    KEYS[1]  repeat
    ARGV[1]  first rank
    ARGV[2]  last rank (inclusive; negative counts from the end)
    ARGV[3]  "1" for ascending next-run order, "0" for descending

  Output:
    flat array: id, score (string), flat HGETALL of repeat:<id>, paused (1 when
    <base>:schedulers:paused, built from the repeat key under the hash tag, holds the id at that
    score, §4.6; else 0), then the next id, score, HGETALL, paused ...

  Events: none.
]]
local members
if ARGV[3] == "1" then
  members = redis.call("ZRANGE", KEYS[1], ARGV[1], ARGV[2], "WITHSCORES")
else
  members = redis.call("ZREVRANGE", KEYS[1], ARGV[1], ARGV[2], "WITHSCORES")
end
local parkedSet = string.sub(KEYS[1], 1, -7) .. "schedulers:paused"
local out = {}
for i = 1, #members, 2 do
  out[#out + 1] = members[i]
  out[#out + 1] = members[i + 1]
  out[#out + 1] = redis.call("HGETALL", KEYS[1] .. ":" .. members[i])
  out[#out + 1] = redis.call("ZSCORE", parkedSet, members[i]) == members[i + 1] and 1 or 0
end
return out
